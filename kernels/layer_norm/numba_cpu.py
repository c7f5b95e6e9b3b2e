"""Numba CPU layer_norm: rows in parallel; per row two float64 reduction passes (mean, then the
variance about it) and one write pass, all vectorised."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import spec

#: reductions may be reordered (vectorised); the sums are float64, so the order does not matter
_FASTMATH = {"reassoc", "contract", "arcp", "nsz"}
#: below this many elements one thread does it all (a parallel launch costs more than it saves)
_PARALLEL_MIN = 1 << 15


@njit(inline="always", fastmath=_FASTMATH)
def _row(x, weight, bias, eps, out, r):
    d = x.shape[1]
    s = 0.0
    for j in range(d):
        s += np.float64(x[r, j])
    mean = s / d
    ss = 0.0
    for j in range(d):
        t = np.float64(x[r, j]) - mean
        ss += t * t
    rstd = 1.0 / np.sqrt(ss / d + eps)
    for j in range(d):
        y = (np.float64(x[r, j]) - mean) * rstd
        if weight is not None:
            y = y * weight[j]
        if bias is not None:
            y = y + bias[j]
        out[r, j] = y


@njit(cache=True, fastmath=_FASTMATH)
def _rows_serial(x, weight, bias, eps, out):
    for r in range(x.shape[0]):
        _row(x, weight, bias, eps, out, r)


@njit(cache=True, parallel=True, fastmath=_FASTMATH)
def _rows_parallel(x, weight, bias, eps, out):
    for r in prange(x.shape[0]):
        _row(x, weight, bias, eps, out, r)


def layer_norm(x, weight=None, bias=None, *, eps=1e-5, out=None):
    x2, w, b, eps, o2, result = spec.prepare(x, weight, bias, eps, out)
    if x2.size == 0:
        return result
    if x2.size >= _PARALLEL_MIN and x2.shape[0] > 1:
        _rows_parallel(x2, w, b, eps, o2)
    else:
        _rows_serial(x2, w, b, eps, o2)
    return result
