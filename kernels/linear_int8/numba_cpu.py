"""Numba CPU linear_int8: the reference's arithmetic (see :mod:`.reference`) in compiled loops.

Quantization is one pass per row of x; the product is one int32 dot product per (row, weight row),
with the weight rows split over Numba's threads when the product has more than
:data:`PARALLEL_MACS` multiply-adds (the weight is read once: every row of x is used while a weight
row is in cache). LLVM vectorises the int8 dot product with the target's widening multiply-adds.
No fast-math: the float epilogue must round as the reference does.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from seqjit.kernels.activations.numba_cpu import activate

from . import spec

#: products with more multiply-adds than this (M * N * K) run on Numba's threads
PARALLEL_MACS = 1 << 20

_127 = np.float32(127.0)
_ZERO = np.float32(0.0)


@njit(cache=True, error_model="numpy", nogil=True)
def _quantize(x, q, scale, qsum):
    m, k = x.shape
    for r in range(m):
        amax = _ZERO
        for i in range(k):
            a = abs(x[r, i])
            if a > amax:
                amax = a
        inv = _127 / amax if amax > _ZERO else _ZERO
        s = 0
        for i in range(k):
            v = np.rint(x[r, i] * inv)
            v = min(max(v, np.float32(-127.0)), _127)
            q[r, i] = np.int8(v)
            s += np.int32(q[r, i])
        qsum[r] = s
        scale[r] = amax / _127


@njit(inline="always")
def _dot(qx, r, qw, j):
    s = np.int32(0)
    for i in range(qx.shape[1]):
        s += np.int32(qx[r, i]) * np.int32(qw[j, i])
    return s


@njit(inline="always")
def _out(acc, xs, ws, bias, has_bias, code):
    s = xs * ws  # float32 product
    y = np.float64(np.float32(acc)) * np.float64(s)
    if has_bias:
        y += np.float64(bias)
    v = np.float32(y)
    return v if code == 0 else activate(v, code)


def _make(parallel: bool):
    @njit(cache=True, error_model="numpy", parallel=parallel, nogil=True)
    def matmul(qx, qw, out):
        for j in prange(qw.shape[0]):
            for r in range(qx.shape[0]):
                out[r, j] = _dot(qx, r, qw, j)

    @njit(cache=True, error_model="numpy", parallel=parallel, nogil=True)
    def linear(qx, xs, qw, ws, bias, has_bias, code, out):
        for j in prange(qw.shape[0]):
            for r in range(qx.shape[0]):
                out[r, j] = _out(_dot(qx, r, qw, j), xs[r], ws[j], bias[j], has_bias, code)

    return matmul, linear


_matmul_serial, _linear_serial = _make(False)
_matmul_parallel, _linear_parallel = _make(True)


def _parallel(m: int, n: int, k: int) -> bool:
    return m * n * k > PARALLEL_MACS


def quantize_int8(x):
    """See :func:`seqjit.kernels.linear_int8.reference.quantize_int8`."""
    x2, q2, s1, q, scale = spec.prepare_quantize(x)
    if x2.shape[0]:
        _quantize(x2, q2, s1, np.empty(x2.shape[0], np.int32))
    return q, scale


def matmul_int8(qx, qw):
    """See :func:`seqjit.kernels.linear_int8.reference.matmul_int8`."""
    qx, qw, out = spec.prepare_matmul(qx, qw)
    if out.size:
        (_matmul_parallel if _parallel(*qx.shape, qw.shape[0]) else _matmul_serial)(qx, qw, out)
    return out


def linear_int8(x, weight, scale, bias=None, *, activation=None, out=None):
    """See :func:`seqjit.kernels.linear_int8.reference.linear_int8`."""
    x2, w, ws, b, code, o2, result = spec.prepare_linear(x, weight, scale, bias, activation, out)
    m, n = o2.shape
    if m == 0 or n == 0:
        return result
    qx = np.empty(x2.shape, np.int8)
    xs = np.empty(m, np.float32)
    _quantize(x2, qx, xs, np.empty(m, np.int32))
    kernel = _linear_parallel if _parallel(m, n, x2.shape[1]) else _linear_serial
    kernel(qx, xs, w, ws, b if b is not None else ws, b is not None, code, o2)
    return result
