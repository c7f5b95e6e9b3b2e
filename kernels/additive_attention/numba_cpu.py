"""Numba CPU additive_attention: ``W_q s`` for the whole batch as one BLAS GEMM, then batch rows in
parallel, each doing its scores (a vectorised tanh-dot over A per key), a masked softmax and the
weighted sum of its keys in one pass over its own data. float32 tanh is the rational approximation
of :mod:`seqjit.kernels.rnn._nbmath` (max 4.4 ulp)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from seqjit.kernels.rnn._nbmath import tanh

from . import spec

_FM = {"reassoc", "contract", "nsz"}


@njit(parallel=True, fastmath=_FM, cache=True)
def _attend(query, keys_proj, keys, w_q, v, lengths, context, weights):
    B, L, A = keys_proj.shape
    Dk = keys.shape[2]
    qp = np.dot(query, w_q.T)  # [B, A]
    for b in prange(B):
        n = lengths[b]
        top = -np.inf
        for j in range(n):
            e = weights.dtype.type(0)
            for a in range(A):
                e += v[a] * tanh(qp[b, a] + keys_proj[b, j, a])
            weights[b, j] = e
            top = max(top, e)
        total = 0.0
        for j in range(n):
            w = np.exp(weights[b, j] - top)
            weights[b, j] = w
            total += w
        for j in range(n, L):
            weights[b, j] = 0
        for d in range(Dk):
            context[b, d] = 0
        if n == 0:
            continue
        inv = 1.0 / total
        for j in range(n):
            w = weights[b, j] * inv
            weights[b, j] = w
            for d in range(Dk):
                context[b, d] += w * keys[b, j, d]


def additive_attention(query, keys_proj, keys, w_q, v, *, lengths=None):
    """See :func:`seqjit.kernels.additive_attention.reference.additive_attention`."""
    p = spec.prepare(query, keys_proj, keys, w_q, v, lengths)
    if p.query.shape[0]:
        _attend(p.query, p.keys_proj, p.keys, p.w_q, p.v, p.lengths, p.context, p.weights)
    return p.context, p.weights
