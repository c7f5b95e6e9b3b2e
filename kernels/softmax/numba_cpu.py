"""Numba CPU softmax / log_softmax: rows in parallel, three passes per row (max, sum, write)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import spec

_EMPTY_MASK = np.ones((0, 0), dtype=np.uint8)


@njit(parallel=True, cache=True, fastmath={"contract", "arcp", "nsz"})
def _softmax_rows(x, mask, has_mask, out, log):
    rows, n = x.shape
    for r in prange(rows):
        m = -np.inf
        for j in range(n):
            if (not has_mask or mask[r, j]) and x[r, j] > m:
                m = x[r, j]
        if m == -np.inf:  # nothing kept (or all -inf): zeros / -inf, never NaN
            for j in range(n):
                out[r, j] = -np.inf if log else 0.0
            continue
        total = 0.0
        if log:
            for j in range(n):
                if not has_mask or mask[r, j]:
                    total += np.exp(x[r, j] - m)
            lse = m + np.log(total)
            for j in range(n):
                out[r, j] = x[r, j] - lse if (not has_mask or mask[r, j]) else -np.inf
        else:
            for j in range(n):
                if not has_mask or mask[r, j]:
                    e = np.exp(x[r, j] - m)
                    out[r, j] = e
                    total += e
                else:
                    out[r, j] = 0.0
            inv = 1.0 / total
            for j in range(n):
                out[r, j] *= inv


def _run(x, mask, out, log):
    x2, m2, o2, result = spec.prepare(x, mask, out)
    if x2.size:
        _softmax_rows(x2, _EMPTY_MASK if m2 is None else m2, m2 is not None, o2, log)
    return result


def softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, False)


def log_softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, True)
