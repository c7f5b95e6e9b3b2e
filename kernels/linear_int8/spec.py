"""linear_int8: ``y = activation(dequantize(q(x) @ W_q^T) + bias)``, int8 weights with per-row scales.

Three ops, one arithmetic (written out in :mod:`.reference`):

- ``quantize_int8(x)``: float32 ``[..., K]`` -> ``(q, scale)``: int8 ``[..., K]`` and float32 ``[...]``,
  symmetric per row: ``scale = max|x| / 127``, ``q = clamp(rint(x * (127 / max|x|)), -127, 127)``
  (all zeros, scale 0, for an all-zero row). Used for the weights once (per output row) and for the
  activations on every call (per input row: dynamic quantization).
- ``matmul_int8(qx, qw)``: int8 ``[M, K]`` x int8 ``[N, K]`` -> the exact int32 sums ``[M, N]``.
- ``linear_int8(x, weight, scale, bias=None, *, activation=None, out=None)``: x float32 ``[..., K]``,
  weight int8 ``[N, K]`` (PyTorch's ``[out, in]`` layout only), scale float32 ``[N]``, bias float32
  ``[N]`` or None -> float32 ``[..., N]``.

x must be finite (a NaN or inf row has no int8 form). K is at most :data:`K_MAX`, so that no int32
sum can overflow (the AVX512-VNNI path sums ``(w + 128) * x``, up to ``255 * 127`` per term).
"""
from __future__ import annotations

import math

import numpy as np

from seqjit.kernels import _checks
from seqjit.kernels.activations.spec import ACTIVATIONS, activation_code

K_MAX = 65536
_F32 = (np.dtype(np.float32),)
_I8 = (np.dtype(np.int8),)
_NDARRAY = np.ndarray


def _check_k(name: str, k: int) -> None:
    if k > K_MAX:
        raise ValueError(f"{name} has {k} columns; int8 products support at most K = {K_MAX} (int32 sums)")


def _array(name: str, x, dtypes, ndim=None):
    return _checks.float_array(name, x, ndim=ndim, dtypes=dtypes)


def prepare_quantize(x, *, device: bool = False):
    """Check ``x`` (float32 ``[..., K]``); return ``(x2d, q2d, scale1d, q, scale)`` (host) or
    ``(x2d, shape)`` (``device=True``)."""
    x = _array("x", x, _F32)
    shape = tuple(x.shape)
    if len(shape) == 0:
        raise ValueError("x must have at least 1 dimension ([..., K]), got a scalar")
    k = shape[-1]
    _check_k("x", k)
    m = math.prod(shape[:-1])
    if device:
        return x.reshape(m, k), shape
    q = np.empty(shape, np.int8)
    scale = np.empty(shape[:-1], np.float32)
    return x.reshape(m, k), q.reshape(m, k), scale.reshape(m), q, scale


def prepare_matmul(qx, qw, *, device: bool = False):
    """Check ``qx`` int8 ``[M, K]`` and ``qw`` int8 ``[N, K]``; return ``(qx, qw, out)`` (``out`` the
    int32 ``[M, N]`` result; its shape when ``device=True``)."""
    qx = _array("qx", qx, _I8, ndim=2)
    qw = _array("qw", qw, _I8, ndim=2)
    k = qx.shape[1]
    _checks.check_shape("qw", qw, (None, k), what="[N, K], K = qx.shape[1]")
    _check_k("qx", k)
    shape = (qx.shape[0], qw.shape[0])
    return qx, qw, shape if device else np.empty(shape, np.int32)


def _prepare_linear_fast(x, weight, scale, bias, activation, out):
    """:func:`prepare_linear` for the common case, in a few attribute reads: host C-contiguous arrays
    of the right dtypes and shapes (as the graph executor passes them on every call). None for
    anything else, which :func:`prepare_linear` then checks in full (and names what is wrong)."""
    if (type(x) is not _NDARRAY or type(weight) is not _NDARRAY or type(scale) is not _NDARRAY
            or (activation is not None and type(activation) is not str) or activation not in ACTIVATIONS):
        return None
    if x.dtype != _F32[0] or weight.dtype != _I8[0] or scale.dtype != _F32[0] or x.ndim == 0 or weight.ndim != 2:
        return None
    if not (x.flags.c_contiguous and weight.flags.c_contiguous and scale.flags.c_contiguous):
        return None
    xshape = x.shape
    k = xshape[-1]
    n, kw = weight.shape
    if kw != k or k > K_MAX or scale.shape != (n,):
        return None
    if bias is not None and (type(bias) is not _NDARRAY or bias.dtype != _F32[0] or bias.shape != (n,)
                             or not bias.flags.c_contiguous):
        return None
    shape = xshape[:-1] + (n,)
    if out is None:
        out = np.empty(shape, np.float32)
    elif (type(out) is not _NDARRAY or out.dtype != _F32[0] or out.shape != shape or not out.flags.c_contiguous
          or not out.flags.writeable):
        return None
    m = x.size // k if k else math.prod(xshape[:-1])
    return x.reshape(m, k), weight, scale, bias, ACTIVATIONS[activation], out.reshape(m, n), out


def prepare_linear(x, weight, scale, bias, activation, out, *, device: bool = False):
    """Check the arguments of ``linear_int8``; return ``(x2d, weight, scale, bias, code, out2d, result)``.

    With ``device=True`` (cuda backend) ``out2d`` is None and ``result`` is the output shape.
    """
    if not device:
        fast = _prepare_linear_fast(x, weight, scale, bias, activation, out)
        if fast is not None:
            return fast
    code = activation_code(activation)
    x = _array("x", x, _F32)
    xshape = tuple(x.shape)
    if len(xshape) == 0:
        raise ValueError("x must have at least 1 dimension ([..., K]), got a scalar")
    k = xshape[-1]
    _check_k("x", k)
    weight = _array("weight", weight, _I8, ndim=2)
    _checks.check_shape("weight", weight, (None, k), what="int8 [N, K], K = x.shape[-1]")
    n = weight.shape[0]
    scale = _array("scale", scale, _F32, ndim=1)
    _checks.check_shape("scale", scale, (n,), what="one float32 scale per weight row")
    if bias is not None:
        bias = _array("bias", bias, _F32, ndim=1)
        _checks.check_shape("bias", bias, (n,), what="one value per output feature")
    shape = xshape[:-1] + (n,)
    m = math.prod(xshape[:-1])
    if device:
        return x.reshape(m, k), weight, scale, bias, code, None, shape
    result = _checks.out_array("out", out, shape, np.dtype(np.float32))
    return x.reshape(m, k), weight, scale, bias, code, result.reshape(m, n), result
