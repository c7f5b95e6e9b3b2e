"""NumPy reference for attention: the readable specification (materialises the full score matrix).

See :mod:`spec` for the arguments and the masking rule.
"""
from __future__ import annotations

import numpy as np

from . import spec


def attention(q, k, v, *, causal=False, lengths=None, scale=None, return_weights=False, out=None):
    """softmax(scale * q @ k^T, masked) @ v over ``[B, H, Lq, D]`` / ``[B, H, Lk, D]`` / ``[B, H, Lk, Dv]``."""
    p = spec.prepare(q, k, v, causal=causal, lengths=lengths, scale=scale, return_weights=return_weights, out=out)
    B, H, Lq, Lk, D, Dv = p.shape
    visible = spec.visible_keys(p.lengths, Lq, Lk, p.causal)                 # [B, Lq]
    keep = np.arange(Lk)[None, None, None, :] < visible[:, None, :, None]   # [B, 1, Lq, Lk]
    scores = np.where(keep, np.matmul(p.q, np.swapaxes(p.k, -1, -2)) * p.q.dtype.type(p.scale), -np.inf)
    row_max = scores.max(axis=-1, keepdims=True, initial=-np.inf)
    row_max = np.where(np.isfinite(row_max), row_max, 0)
    e = np.where(keep, np.exp(scores - row_max), 0)
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1)                             # all-zero rows stay zero
    p.out[...] = np.matmul(weights, p.v)
    if p.return_weights:
        p.weights[...] = weights
    return p.result()
