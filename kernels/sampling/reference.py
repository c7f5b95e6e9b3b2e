"""The distribution :func:`seqjit.decoding.processors.sample` draws one row's token from, computed
exactly: the readable specification of :mod:`.cuda` (which draws from it on the device).

- ``x = scores / temperature`` (float64);
- top-k (``0 < topk < V``): scores below the k-th largest are dropped (ties with it kept);
- top-p (``topp < 1``): over the kept scores sorted best first (ties by index), a token is dropped when
  the probability mass before it is at least ``topp`` (the first is always kept);
- the kept scores' softmax.
"""
from __future__ import annotations

import numpy as np


def distribution(row, temperature: float, topk: int, topp: float) -> np.ndarray:
    """float64 ``[V]``: the probability of each token of ``row`` (one row of processed scores)."""
    x = np.asarray(row, np.float64) / temperature
    vocab = x.shape[0]
    order = np.argsort(-x, kind="stable")
    keep = x >= x[order[topk - 1]] if 0 < topk < vocab else np.ones(vocab, bool)
    p = np.where(keep, np.exp(x - x.max()), 0.0)
    p /= p.sum()
    if topp < 1.0:
        sp = p[order]
        drop = np.cumsum(sp) - sp >= topp
        drop[0] = False
        p[order[drop]] = 0.0
        p /= p.sum()
    return p
