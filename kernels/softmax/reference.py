"""NumPy reference for softmax / log_softmax: the readable specification (the rules are in :mod:`spec`)."""
from __future__ import annotations

import numpy as np

from . import spec


def _shifted(x2, m2):
    """For ``[rows, n]`` input: ``keep`` (the kept elements), ``shifted`` (kept ``x`` minus the row
    max, -inf where removed), ``broken`` (rows with a kept NaN or +inf: all NaN) and ``empty`` (rows
    with nothing kept above -inf: zeros / -inf)."""
    keep = np.ones(x2.shape, dtype=bool) if m2 is None else m2.astype(bool)
    z = np.where(keep, x2, -np.inf)
    row_max = z.max(axis=-1, keepdims=True)  # NaN when a kept element is NaN
    broken = np.isnan(row_max) | (row_max == np.inf)
    empty = row_max == -np.inf
    # invalid: inf - inf in the broken rows; over: finite extremes (-3e38 - 3e38 in float32) round to
    # -inf, the right answer (exp gives 0): neither is worth a warning in the caller's output
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = z - np.where(broken | empty, 0, row_max)
    return keep & ~empty, shifted, broken, empty


def softmax(x, mask=None, *, out=None):
    """Softmax over the last axis of ``x``; see :mod:`spec` for ``mask`` and non-finite rows."""
    x2, m2, o2, result = spec.prepare(x, mask, out)
    if x2.size == 0:
        return result
    keep, shifted, broken, empty = _shifted(x2, m2)
    e = np.where(keep, np.exp(shifted), 0)
    total = np.where(empty, 1, e.sum(axis=-1, keepdims=True))
    with np.errstate(invalid="ignore"):  # inf / inf in the broken rows, which become NaN anyway
        o2[...] = np.where(broken, np.nan, e / total)
    return result


def log_softmax(x, mask=None, *, out=None):
    """Log-softmax over the last axis of ``x``; removed elements and empty rows give -inf."""
    x2, m2, o2, result = spec.prepare(x, mask, out)
    if x2.size == 0:
        return result
    keep, shifted, broken, empty = _shifted(x2, m2)
    total = np.where(keep, np.exp(shifted), 0).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        o2[...] = np.where(broken, np.nan, np.where(keep, shifted - np.log(total), -np.inf))
    return result
