"""additive_attention: Bahdanau scoring, argument checks and output allocation.

``e[b, j] = v . tanh(W_q s_b + keys_proj[b, j])`` for query ``s`` ``[B, Dq]``, ``w_q`` ``[A, Dq]``
(PyTorch Linear layout), ``v`` ``[A]`` and ``keys_proj`` ``[B, L, A]`` (``U h_j`` plus any biases of
W_q and U, precomputed once per source); ``weights[b] = softmax(e[b, :lengths[b]])`` (zero beyond) and
``context[b] = weights[b] @ keys[b]`` with ``keys`` ``[B, L, Dk]``. A row with ``lengths[b] == 0`` gets
zero weights and a zero context, never NaN.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqjit.kernels import _checks


@dataclass
class Problem:
    query: np.ndarray  # [B, Dq]
    keys_proj: np.ndarray  # [B, L, A]
    keys: np.ndarray  # [B, L, Dk]
    w_q: np.ndarray  # [A, Dq]
    v: np.ndarray  # [A]
    lengths: np.ndarray  # int64 [B]
    context: np.ndarray | None = None  # [B, Dk]
    weights: np.ndarray | None = None  # [B, L]


def prepare(query, keys_proj, keys, w_q, v, lengths, *, device: bool = False) -> Problem:
    """Check the arguments; allocate ``context`` and ``weights`` unless ``device`` (cuda backend)."""
    query = _checks.float_array("query", query, ndim=2)
    dtype = np.dtype(query.dtype)
    keys_proj = _checks.float_array("keys_proj", keys_proj, ndim=3)
    keys = _checks.float_array("keys", keys, ndim=3)
    w_q = _checks.float_array("w_q", w_q, ndim=2)
    v = _checks.float_array("v", v, ndim=1)
    _checks.same_dtype(dtype, keys_proj=keys_proj, keys=keys, w_q=w_q, v=v)
    B, Dq = query.shape
    _, L, A = keys_proj.shape
    _checks.check_shape("keys_proj", keys_proj, (B, None, None), what="[batch of query, L, A]")
    _checks.check_shape("keys", keys, (B, L, None), what="[batch of query, L of keys_proj, Dk]")
    _checks.check_shape("w_q", w_q, (A, Dq), what="[A of keys_proj, Dq of query]")
    _checks.check_shape("v", v, (A,), what="[A of keys_proj]")
    if lengths is None:
        lens = np.full(B, L, dtype=np.int64)
    else:
        lens = _checks.lengths_array("lengths", lengths, B, L)
    p = Problem(query, keys_proj, keys, w_q, v, lens)
    if not device:
        p.context = np.empty((B, keys.shape[2]), dtype)
        p.weights = np.empty((B, L), dtype)
    return p
