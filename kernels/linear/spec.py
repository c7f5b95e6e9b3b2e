"""linear: ``y = activation(x @ W^T + bias)``: argument checks and output allocation.

- ``x``: ``[..., K]``; the result is ``[..., N]``.
- ``weight``: ``[N, K]`` with ``weight_layout="out_in"`` (PyTorch's ``nn.Linear.weight``), or
  ``[K, N]`` with ``weight_layout="in_out"`` (the pre-transposed copy a graph pass makes at load).
- ``bias``: ``[N]`` or None.
- ``activation``: None, "relu", "gelu" (erf form), "gelu_tanh", "silu" or "tanh", applied in the
  GEMM epilogue (see :mod:`seqjit.kernels.activations`).
"""
from __future__ import annotations

import math

import numpy as np

from seqjit.kernels import _checks
from seqjit.kernels.activations.spec import activation_code

LAYOUTS = ("out_in", "in_out")


def prepare(x, weight, bias, activation, weight_layout, out, *, device: bool = False):
    """Check the arguments; return ``(x2d, weight, bias, code, out_in, out2d, result)``.

    ``x2d`` is ``x`` viewed as ``[M, K]``; ``code`` the activation code; ``out_in`` is True for the
    ``[N, K]`` layout; ``out2d`` a ``[M, N]`` view of ``result`` (``out`` itself when given). With
    ``device=True`` (cuda backend) no host output is made: ``out2d`` is None and ``result`` is the shape.
    """
    if weight_layout not in LAYOUTS:
        raise ValueError(f"weight_layout must be 'out_in' ([N, K]) or 'in_out' ([K, N]), got {weight_layout!r}")
    code = activation_code(activation)
    if isinstance(x, np.ndarray) and x.ndim == 0:  # (float_array would turn it into shape (1,))
        x = x.reshape(())
    else:
        x = _checks.float_array("x", x)
    if len(x.shape) == 0:
        raise ValueError("x must have at least 1 dimension ([..., K]), got a scalar")
    weight = _checks.float_array("weight", weight, ndim=2)
    _checks.same_dtype(np.dtype(x.dtype), weight=weight)
    xshape = tuple(x.shape)  # a plain tuple: simulated device shapes refuse negative indices
    k = xshape[-1]
    out_in = weight_layout == "out_in"
    if out_in:
        _checks.check_shape("weight", weight, (None, k), what="[N, K] for weight_layout='out_in', K = x.shape[-1]")
        n = weight.shape[0]
    else:
        _checks.check_shape("weight", weight, (k, None), what="[K, N] for weight_layout='in_out', K = x.shape[-1]")
        n = weight.shape[1]
    if bias is not None:
        bias = _checks.float_array("bias", bias, ndim=1)
        _checks.check_shape("bias", bias, (n,), what="one value per output feature")
        _checks.same_dtype(np.dtype(x.dtype), bias=bias)
    shape = xshape[:-1] + (n,)
    m = math.prod(xshape[:-1])
    if device:
        return x.reshape(m, k), weight, bias, code, out_in, None, shape
    result = _checks.out_array("out", out, shape, x.dtype)
    return x.reshape(m, k), weight, bias, code, out_in, result.reshape(m, n), result
