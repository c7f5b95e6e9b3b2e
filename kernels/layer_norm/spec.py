"""layer_norm over the last axis: argument checks and output allocation.

``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the mean and the biased variance taken over
the last axis of ``x`` (``[..., D]``), as ``torch.nn.functional.layer_norm(x, (D,), weight, bias, eps)``.
``weight`` and ``bias`` are ``[D]`` or None (no scale / no shift).
"""
from __future__ import annotations

import math

import numpy as np

from seqjit.kernels import _checks


def prepare(x, weight, bias, eps, out, *, device: bool = False):
    """Check the arguments; return ``(x2d, weight, bias, eps, out2d, result)``.

    ``x2d`` is ``x`` viewed as ``[rows, D]``; ``out2d`` a ``[rows, D]`` view of ``result`` (``out``
    itself when given). With ``device=True`` (cuda backend) no host output is made: ``out2d`` is
    None and ``result`` is the shape.
    """
    if isinstance(x, np.ndarray) and x.ndim == 0:  # (float_array would turn it into shape (1,))
        x = x.reshape(())
    else:
        x = _checks.float_array("x", x)
    if len(x.shape) == 0:
        raise ValueError("x must have at least 1 dimension ([..., D]), got a scalar")
    shape = tuple(x.shape)
    d = shape[-1]
    rows = math.prod(shape[:-1])
    params = {}
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            p = _checks.float_array(name, p, ndim=1)
            _checks.check_shape(name, p, (d,), what="one value per feature, D = x.shape[-1]")
            _checks.same_dtype(np.dtype(x.dtype), **{name: p})
        params[name] = p
    eps = float(eps)
    if not np.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be a positive finite number, got {eps}")
    if device:
        return x.reshape(rows, d), params["weight"], params["bias"], eps, None, shape
    result = _checks.out_array("out", out, shape, x.dtype)
    return x.reshape(rows, d), params["weight"], params["bias"], eps, result.reshape(rows, d), result
