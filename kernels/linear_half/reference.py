"""NumPy reference for linear_half: the readable specification (see :mod:`.spec`).

- widen: float16 bits through NumPy's ``float16`` (exact); bfloat16 bits shifted into the top half
  of a float32 (exact by construction).
- narrow: round to nearest, ties to even, written out on the float32 bits for bfloat16 (add
  ``0x7fff`` plus the lowest kept bit, keep the top half), NumPy's float32 -> float16 cast (RNE, with
  subnormals and overflow to inf) for float16; NaNs made quiet, sign and top payload bits kept.
- linear: ``x @ widen(W)^T + b`` in float64, rounded once (as :mod:`seqjit.kernels.linear`'s
  reference): the float32 kernels agree to float32 rounding of their sums.
- linear with ``arith="bfloat16"``: x rounded to bf16 (:func:`round_bf16`), the weights' bf16
  subnormals zeroed, then as above: the exact sum of the exact products, rounded once. The kernels
  sum in float32, in vdpbf16ps's order (native_bf16dot.h): they agree to float32 rounding of sums.
- embedding: ``widen(table)[ids] * scale (+ positions)`` in float64, rounded once.
"""
from __future__ import annotations

import numpy as np

from seqjit.kernels.activations.reference import apply as _activate

from . import spec


def _widen(w: np.ndarray, code: int) -> np.ndarray:
    if code == spec.FLOAT16:
        return w.view(np.float16).astype(np.float32)
    return (w.astype(np.uint32) << 16).view(np.float32)


def _narrow(x: np.ndarray, code: int) -> np.ndarray:
    bits = x.view(np.uint32)
    nan = np.isnan(x)
    if code == spec.FLOAT16:
        with np.errstate(over="ignore", invalid="ignore"):
            out = x.astype(np.float16).view(np.uint16)
        # NaN: sign, all-ones exponent, the quiet bit, the payload's top 9 bits
        quiet = ((bits >> 16) & 0x8000) | 0x7E00 | ((bits >> 13) & 0x01FF)
    else:
        wide = bits.astype(np.uint64)
        out = ((wide + 0x7FFF + ((wide >> 16) & 1)) >> 16).astype(np.uint16)
        quiet = (bits >> 16) | 0x0040
    return np.where(nan, quiet.astype(np.uint16), out).astype(np.uint16)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 ``x`` as the bfloat16 arithmetic reads it, as float32: rounded to bf16 (nearest, ties to
    even), a float32 subnormal as a zero of its sign (vcvtne2ps2bf16 reads it so), NaN made quiet."""
    x = np.asarray(x, np.float32)
    sub = (x.view(np.uint32) & 0x7F800000) == 0
    bits = _narrow(np.where(sub, np.copysign(np.float32(0), x), x).astype(np.float32), spec.BFLOAT16)
    return _widen(bits, spec.BFLOAT16)


def _flush_bf16(w: np.ndarray) -> np.ndarray:
    """bf16 bits with their subnormals zeroed (sign kept): what vdpbf16ps reads."""
    return np.where((w & 0x7F80) == 0, w & 0x8000, w).astype(np.uint16)


def widen_half(w, fmt):
    """uint16 bits ``[...]`` in ``fmt`` -> float32 ``[...]`` (exact)."""
    w, code = spec.prepare_widen(w, fmt)
    return _widen(w, code)


def narrow_half(x, fmt):
    """float32 ``[...]`` -> the uint16 bits of ``fmt``, round to nearest even (see the module docstring)."""
    x, code = spec.prepare_narrow(x, fmt)
    return _narrow(x, code)


def linear_half(x, weight, bias=None, *, fmt, activation=None, arith="float32", out=None):
    """``activation(x @ widen(weight)^T + bias)``: x float32 ``[..., K]``, weight uint16 ``[N, K]``;
    ``arith="bfloat16"``: x rounded to bfloat16 first (see the module docstring)."""
    acode = spec.arith_code(arith, fmt)
    x2, w, b, fcode, code, o2, result = spec.prepare_linear(x, weight, bias, fmt, activation, out)
    if acode:
        x2, w = round_bf16(x2), _flush_bf16(w)
    y = x2.astype(np.float64) @ _widen(w, fcode).astype(np.float64).T
    if b is not None:
        y = y + b
    o2[...] = _activate(y, code)
    return result


def embedding_half(ids, table, *, fmt, scale=1.0, positions=None, out=None):
    """``widen(table)[ids] * scale`` (+ ``positions[l]`` along the last ids axis), float32."""
    ids1, table, fcode, scale, positions, o2, result = spec.prepare_embedding(ids, table, fmt, scale, positions, out)
    y = _widen(table[ids1], fcode).astype(np.float64) * scale
    if positions is not None:
        y = y.reshape(-1, positions.shape[0], table.shape[1]) + positions
    o2[...] = y.reshape(o2.shape)
    return result
