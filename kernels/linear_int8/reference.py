"""NumPy reference for linear_int8: the readable specification of the arithmetic every backend
reproduces (the int32 sums exactly; the output bit for bit before the activation).

1. Quantize each row of x (and, once, each row of the weight) symmetrically to int8, in float32:
   ``amax = max|x|``, ``scale = amax / 127``, ``q = clamp(rint(x * (127 / amax)), -127, 127)``
   (``127 / amax`` is one float32 division; rint rounds half to even; a zero row gives q = 0, scale 0).
2. ``acc[m, n] = sum_k qx[m, k] * qw[n, k]`` in int32 (exact).
3. ``y[m, n] = float32(float64(float32(acc)) * float64(float32(xs[m] * ws[n])) + float64(bias[n]))``:
   the sum rounded to float32, the two scales multiplied in float32; their product is exact in
   float64, so a fused multiply-add gives the same float32 result as a separate multiply and add.
4. ``out = activation(y)`` (computed in float64 here and rounded once; compiled backends use their
   float32 activations, so activated outputs agree to a few ulps, not bit for bit).
"""
from __future__ import annotations

import numpy as np

from seqjit.kernels.activations.reference import apply as _activate

from . import spec

_127 = np.float32(127.0)


def _quantize_rows(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    amax = np.abs(x2).max(axis=1, initial=np.float32(0.0))
    nonzero = amax > 0
    inv = np.where(nonzero, _127 / np.where(nonzero, amax, _127), np.float32(0.0)).astype(np.float32)
    q = np.clip(np.rint(x2 * inv[:, None]), -127, 127).astype(np.int8)
    return q, (amax / _127).astype(np.float32)


def quantize_int8(x):
    """Per-row symmetric int8: float32 ``[..., K]`` -> ``(q int8 [..., K], scale float32 [...])``."""
    x2, q2, s1, q, scale = spec.prepare_quantize(x)
    q2[...], s1[...] = _quantize_rows(x2)
    return q, scale


def matmul_int8(qx, qw):
    """``qx @ qw.T`` in exact int32: int8 ``[M, K]``, int8 ``[N, K]`` -> int32 ``[M, N]``."""
    qx, qw, out = spec.prepare_matmul(qx, qw)
    out[...] = qx.astype(np.int64) @ qw.astype(np.int64).T
    return out


def linear_int8(x, weight, scale, bias=None, *, activation=None, out=None):
    """``activation(dequantize(quantize(x) @ weight^T) + bias)``; see the module docstring."""
    x2, w, ws, b, code, o2, result = spec.prepare_linear(x, weight, scale, bias, activation, out)
    qx, xs = _quantize_rows(x2)
    acc = qx.astype(np.int64) @ w.astype(np.int64).T
    s = (xs[:, None] * ws[None, :]).astype(np.float32)
    y = acc.astype(np.float32).astype(np.float64) * s.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    y = y.astype(np.float32)
    o2[...] = y if code == 0 else _activate(y.astype(np.float64), code)
    return result
