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
from seqjit.kernels.activations.spec import ACTIVATIONS, activation_code

LAYOUTS = ("out_in", "in_out")
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_NDARRAY = np.ndarray


def _prepare_fast(x, weight, bias, activation, weight_layout, out):
    """:func:`prepare` for the common case, in a few attribute reads: host C-contiguous arrays of one
    float dtype and matching shapes (as the graph executor passes them on every call). None for
    anything else, which :func:`prepare` then checks in full (and names what is wrong)."""
    if type(x) is not _NDARRAY or type(weight) is not _NDARRAY or (activation is not None and type(activation) is not str):
        return None
    dtype = x.dtype
    if dtype not in _FLOATS or weight.dtype != dtype or x.ndim == 0 or weight.ndim != 2:
        return None
    if not (x.flags.c_contiguous and weight.flags.c_contiguous) or activation not in ACTIVATIONS:
        return None
    xshape = x.shape
    k = xshape[-1]
    if weight_layout == "out_in":
        n, kw = weight.shape
    elif weight_layout == "in_out":
        kw, n = weight.shape
    else:
        return None
    if kw != k:
        return None
    if bias is not None and (type(bias) is not _NDARRAY or bias.dtype != dtype or bias.shape != (n,)
                             or not bias.flags.c_contiguous):
        return None
    shape = xshape[:-1] + (n,)
    if out is None:
        out = np.empty(shape, dtype)
    elif (type(out) is not _NDARRAY or out.dtype != dtype or out.shape != shape or not out.flags.c_contiguous
          or not out.flags.writeable):
        return None
    m = x.size // k if k else math.prod(xshape[:-1])
    return x.reshape(m, k), weight, bias, ACTIVATIONS[activation], weight_layout == "out_in", out.reshape(m, n), out


def prepare(x, weight, bias, activation, weight_layout, out, *, device: bool = False):
    """Check the arguments; return ``(x2d, weight, bias, code, out_in, out2d, result)``.

    ``x2d`` is ``x`` viewed as ``[M, K]``; ``code`` the activation code; ``out_in`` is True for the
    ``[N, K]`` layout; ``out2d`` a ``[M, N]`` view of ``result`` (``out`` itself when given). With
    ``device=True`` (cuda backend) no host output is made: ``out2d`` is None and ``result`` is the shape.
    """
    if not device:
        fast = _prepare_fast(x, weight, bias, activation, weight_layout, out)
        if fast is not None:
            return fast
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
