"""NumPy reference for additive_attention (Bahdanau): the readable specification; see :mod:`spec`."""
from __future__ import annotations

import numpy as np

from . import spec


def additive_attention(query, keys_proj, keys, w_q, v, *, lengths=None):
    """query ``[B, Dq]``, keys_proj ``[B, L, A]``, keys ``[B, L, Dk]``, w_q ``[A, Dq]``, v ``[A]``,
    lengths ``[B]`` -> ``(context [B, Dk], weights [B, L])``."""
    p = spec.prepare(query, keys_proj, keys, w_q, v, lengths)
    B, L, _ = p.keys_proj.shape
    scores = np.tanh((p.query @ p.w_q.T)[:, None, :] + p.keys_proj) @ p.v  # [B, L]
    keep = np.arange(L)[None, :] < p.lengths[:, None]
    z = np.where(keep, scores, -np.inf)
    top = np.where(keep.any(axis=1, keepdims=True), z.max(axis=1, keepdims=True, initial=-np.inf), 0)
    e = np.where(keep, np.exp(z - top), 0)
    total = e.sum(axis=1, keepdims=True)
    p.weights[...] = e / np.where(total > 0, total, 1)
    p.context[...] = np.einsum("bl,bld->bd", p.weights, p.keys)
    return p.context, p.weights
