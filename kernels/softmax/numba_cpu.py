"""Numba CPU softmax / log_softmax: rows in parallel, three vectorised passes per row (max, sum of
exponentials, write).

float32 rows use the vectorisable ``exp`` of :mod:`seqjit.kernels._vecmath` (libm's ``expf`` cannot
be vectorised here); float64 rows use libm. Small inputs run on one thread: a parallel launch costs
more than it saves.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from seqjit.kernels._vecmath import fmax, vexp

from . import spec

_EMPTY_MASK = np.ones((0, 0), dtype=np.uint8)
#: max and sum reductions may be reordered (vectorised); inputs may hold -inf but not NaN
_FASTMATH = {"nnan", "reassoc", "contract", "arcp", "nsz"}
_PARALLEL_MIN = 1 << 15


@njit(cache=True, fastmath=_FASTMATH, error_model="numpy")
def _row(x, mask, has_mask, out, log, r):
    n = x.shape[1]
    real = x.dtype.type  # keep float32 rows in float32 (a float64 scalar would widen every lane)
    ninf = real(-np.inf)
    m = ninf
    if has_mask:
        for j in range(n):
            v = x[r, j] if mask[r, j] else ninf
            m = fmax(m, v)
    else:
        for j in range(n):
            m = fmax(m, x[r, j])
    if m == -np.inf:  # nothing kept (or all -inf): zeros / -inf, never NaN
        for j in range(n):
            out[r, j] = ninf if log else 0
        return
    total = real(0)
    if log:
        if has_mask:
            for j in range(n):
                e = vexp(x[r, j] - m)  # computed unconditionally: a select, not a branch
                total += e if mask[r, j] else 0
        else:
            for j in range(n):
                total += vexp(x[r, j] - m)
        lse = m + np.log(total)
        for j in range(n):
            out[r, j] = x[r, j] - lse if (not has_mask or mask[r, j]) else ninf
    else:
        if has_mask:
            for j in range(n):
                e = vexp(x[r, j] - m)
                e = e if mask[r, j] else 0
                out[r, j] = e
                total += e
        else:
            for j in range(n):
                e = vexp(x[r, j] - m)
                out[r, j] = e
                total += e
        inv = real(1) / total
        for j in range(n):
            out[r, j] *= inv


@njit(cache=True, fastmath=_FASTMATH, error_model="numpy")
def _rows_serial(x, mask, has_mask, out, log):
    for r in range(x.shape[0]):
        _row(x, mask, has_mask, out, log, r)


@njit(cache=True, parallel=True, fastmath=_FASTMATH, error_model="numpy")
def _rows_parallel(x, mask, has_mask, out, log):
    for r in prange(x.shape[0]):
        _row(x, mask, has_mask, out, log, r)


def _run(x, mask, out, log):
    x2, m2, o2, result = spec.prepare(x, mask, out)
    if x2.size == 0:
        return result
    mask2 = _EMPTY_MASK if m2 is None else m2
    if x2.size >= _PARALLEL_MIN and x2.shape[0] > 1:
        _rows_parallel(x2, mask2, m2 is not None, o2, log)
    else:
        _rows_serial(x2, mask2, m2 is not None, o2, log)
    return result


def softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, False)


def log_softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, True)
