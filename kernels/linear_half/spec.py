"""linear_half: 16-bit weights (IEEE fp16 or bf16, as their raw bits in ``uint16``), float32 arithmetic.

A 16-bit weight is a ``uint16`` NumPy array holding the bits; ``fmt`` names their format:
``"float16"`` (IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits) or ``"bfloat16"`` (the top half of
a float32: 1 sign, 8 exponent, 7 mantissa bits). Every 16-bit value is exactly a float32, so the
kernels widen the weights and compute as float32 would on the widened weights.

- ``widen_half(w, fmt)``: uint16 ``[...]`` -> float32 ``[...]`` (exact).
- ``narrow_half(x, fmt)``: float32 ``[...]`` -> uint16 ``[...]``, rounded to nearest, ties to even
  (subnormals too); a NaN stays a NaN of the same sign, made quiet, its payload's top bits kept; a
  float16 overflow gives +-inf (the caller refuses it, naming the tensor).
- ``linear_half(x, weight, bias=None, *, fmt, activation=None, arith="float32", out=None)``: x float32
  ``[..., K]``, weight uint16 ``[N, K]`` (PyTorch's ``[out, in]`` layout), bias float32 ``[N]`` or None
  -> float32 ``[..., N] = activation(x @ widen(weight)^T + bias)``, accumulated in float32.
  ``arith="bfloat16"`` (bfloat16 weights only): the products of AVX512-BF16's ``vdpbf16ps``: x rounded
  to bfloat16 first (to nearest, ties to even; float32 subnormals as zero), bf16 subnormal weights as
  zero, each product exact, accumulated in float32 (:func:`round_bf16`; the kernels' order of the
  sum: kernels/linear_half/native_bf16dot.h).
- ``embedding_half(ids, table, *, fmt, scale=1.0, positions=None, out=None)``: the ``embedding`` op
  (:mod:`seqjit.kernels.embedding`) over a uint16 ``[V, D]`` table: rows widened to float32, times
  ``scale`` (+ float32 ``positions[l]``), float32 ``[..., D]``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from seqjit.kernels import _checks
from seqjit.kernels.activations.spec import ACTIVATIONS, activation_code
from seqjit.kernels.embedding.spec import check_ids

#: fmt name -> the integer code the native kernels switch on
FORMATS: dict = {"float16": 0, "bfloat16": 1}
FLOAT16, BFLOAT16 = 0, 1
#: arith name -> the integer code of the native instruction (0: float32 products, 1: bf16 products)
ARITHS: dict = {"float32": 0, "bfloat16": 1}
_F32 = np.dtype(np.float32)
_U16 = np.dtype(np.uint16)
_NDARRAY = np.ndarray


def format_code(fmt) -> int:
    """The kernel code of ``fmt`` ("float16" or "bfloat16"); ValueError naming ``fmt`` otherwise."""
    if type(fmt) is str and fmt in FORMATS:
        return FORMATS[fmt]
    raise ValueError(f"fmt must be 'float16' or 'bfloat16', got {fmt!r}")


def arith_code(arith, fmt) -> int:
    """The code of ``arith`` ("float32" or "bfloat16": the products' arithmetic) for weights of ``fmt``;
    ValueError naming ``arith`` for another value, or for bfloat16 arithmetic over float16 weights."""
    if not (type(arith) is str and arith in ARITHS):
        raise ValueError(f"arith must be 'float32' or 'bfloat16', got {arith!r}")
    if arith == "bfloat16" and fmt != "bfloat16":
        raise ValueError(f"arith 'bfloat16' needs bfloat16 weights (fmt 'bfloat16'), got fmt {fmt!r}")
    return ARITHS[arith]


def half_array(name: str, w, *, ndim=None):
    """``w`` as a C-contiguous uint16 array (the bits); a float16 array is refused with the fix."""
    if isinstance(w, np.ndarray) and w.dtype == np.float16:
        raise TypeError(f"{name} must hold the raw 16-bit patterns as uint16 (pass {name}.view(numpy.uint16)), "
                        f"got dtype float16")
    return _checks.float_array(name, w, ndim=ndim, dtypes=(_U16,))


def _f32(name: str, x, *, ndim=None):
    return _checks.float_array(name, x, ndim=ndim, dtypes=(_F32,))


def prepare_widen(w, fmt):
    """Check ``widen_half``'s arguments; return ``(w, code)``."""
    code = format_code(fmt)
    return half_array("w", w), code


def prepare_narrow(x, fmt):
    """Check ``narrow_half``'s arguments; return ``(x, code)``."""
    code = format_code(fmt)
    return _f32("x", x), code


def _prepare_linear_fast(x, weight, bias, fmt, activation, out):
    """:func:`prepare_linear` for the common case (host C-contiguous arrays of the right dtypes and
    shapes, as the graph executor passes them); None for anything else, checked in full then."""
    if (type(x) is not _NDARRAY or type(weight) is not _NDARRAY or type(fmt) is not str or fmt not in FORMATS
            or (activation is not None and type(activation) is not str) or activation not in ACTIVATIONS):
        return None
    if x.dtype != _F32 or weight.dtype != _U16 or x.ndim == 0 or weight.ndim != 2:
        return None
    if not (x.flags.c_contiguous and weight.flags.c_contiguous):
        return None
    xshape = x.shape
    k = xshape[-1]
    n, kw = weight.shape
    if kw != k:
        return None
    if bias is not None and (type(bias) is not _NDARRAY or bias.dtype != _F32 or bias.shape != (n,)
                             or not bias.flags.c_contiguous):
        return None
    shape = xshape[:-1] + (n,)
    if out is None:
        out = np.empty(shape, _F32)
    elif (type(out) is not _NDARRAY or out.dtype != _F32 or out.shape != shape or not out.flags.c_contiguous
          or not out.flags.writeable):
        return None
    m = x.size // k if k else math.prod(xshape[:-1])
    return x.reshape(m, k), weight, bias, FORMATS[fmt], ACTIVATIONS[activation], out.reshape(m, n), out


def prepare_linear(x, weight, bias, fmt, activation, out, *, device: bool = False):
    """Check the arguments of ``linear_half``; return ``(x2d, weight, bias, fmt_code, act_code, out2d,
    result)``. With ``device=True`` (cuda backend) ``out2d`` is None and ``result`` is the shape."""
    if not device:
        fast = _prepare_linear_fast(x, weight, bias, fmt, activation, out)
        if fast is not None:
            return fast
    fcode = format_code(fmt)
    code = activation_code(activation)
    x = _f32("x", x)
    xshape = tuple(x.shape)
    if len(xshape) == 0:
        raise ValueError("x must have at least 1 dimension ([..., K]), got a scalar")
    k = xshape[-1]
    weight = half_array("weight", weight, ndim=2)
    _checks.check_shape("weight", weight, (None, k), what="uint16 [N, K], K = x.shape[-1]")
    n = weight.shape[0]
    if bias is not None:
        bias = _f32("bias", bias, ndim=1)
        _checks.check_shape("bias", bias, (n,), what="one float32 value per output feature")
    shape = xshape[:-1] + (n,)
    m = math.prod(xshape[:-1])
    if device:
        return x.reshape(m, k), weight, bias, fcode, code, None, shape
    result = _checks.out_array("out", out, shape, _F32)
    return x.reshape(m, k), weight, bias, fcode, code, result.reshape(m, n), result


def prepare_embedding(ids, table, fmt, scale, positions, out, *, device: bool = False, host_ids=None):
    """Check the arguments of ``embedding_half`` (as :func:`seqjit.kernels.embedding.spec.prepare`,
    with a uint16 table); return ``(ids1d, table, fmt_code, scale, positions, out2d, result)``."""
    fcode = format_code(fmt)
    table = half_array("table", table, ndim=2)
    vocab, dim = table.shape
    checked = check_ids(ids if host_ids is None else host_ids, vocab)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not np.isfinite(scale):
        raise ValueError(f"scale must be a finite real number, got {scale!r}")
    shape = tuple(checked.shape) + (dim,)
    if positions is not None:
        if checked.ndim == 0:
            raise ValueError("positions needs ids with at least 1 dimension (positions run along the last axis)")
        positions = _f32("positions", positions, ndim=2)
        _checks.check_shape("positions", positions, (checked.shape[-1], dim),
                            what="float32 [L, D], L = ids.shape[-1], D = table.shape[1]")
    ids1d = checked.reshape(-1) if host_ids is None else ids.reshape(checked.size)
    if device:
        return ids1d, table, fcode, float(scale), positions, None, shape
    result = _checks.out_array("out", out, shape, _F32)
    return ids1d, table, fcode, float(scale), positions, result.reshape(checked.size, dim), result
