"""NumPy reference for softmax / log_softmax: the readable specification."""
from __future__ import annotations

import numpy as np

from . import spec


def softmax(x, mask=None, *, out=None):
    """Softmax over the last axis of ``x``; see :mod:`spec` for ``mask``."""
    x2, m2, o2, result = spec.prepare(x, mask, out)
    keep = np.ones(x2.shape, dtype=bool) if m2 is None else m2.astype(bool)
    z = np.where(keep, x2, -np.inf)
    row_max = z.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0)
    e = np.where(keep, np.exp(z - row_max), 0)
    total = e.sum(axis=-1, keepdims=True)
    o2[...] = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    return result


def log_softmax(x, mask=None, *, out=None):
    """Log-softmax over the last axis of ``x``; removed elements and empty rows give -inf."""
    x2, m2, o2, result = spec.prepare(x, mask, out)
    keep = np.ones(x2.shape, dtype=bool) if m2 is None else m2.astype(bool)
    z = np.where(keep, x2, -np.inf)
    row_max = z.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.log(np.where(keep, np.exp(z - row_max), 0).sum(axis=-1, keepdims=True)) + row_max
        o2[...] = np.where(keep, z - lse, -np.inf)
    return result
