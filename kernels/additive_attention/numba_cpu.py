"""Numba CPU additive_attention: batch rows in parallel, each doing ``W_q s`` (the 4-row dot-product
kernel of :mod:`seqjit.kernels.rnn._nbgemm`, no BLAS), its scores (a vectorised tanh-dot over A per
key), a masked softmax and the weighted sum of its keys. Small calls run on one thread (see
``seqjit.kernels.rnn._driver.workers``). float32 tanh is the rational approximation of
:mod:`seqjit.kernels.rnn._nbmath` (max 4.4 ulp)."""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from seqjit.kernels.rnn._driver import workers
from seqjit.kernels.rnn._nbgemm import FASTMATH as _FM
from seqjit.kernels.rnn._nbgemm import dot_rows
from seqjit.kernels.rnn._nbmath import tanh

from . import spec


@njit(parallel=True, fastmath=_FM, cache=True)
def _attend(query, keys_proj, keys, w_q, v, lengths, context, weights):
    B, L, A = keys_proj.shape
    Dk = keys.shape[2]
    qp = np.empty((B, A), query.dtype)
    for b in prange(B):
        dot_rows(w_q, 0, A, query, b, 1, qp, b, 0)  # qp[b] = w_q @ query[b]
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
    B, L, A = p.keys_proj.shape
    if B:
        n = workers(B * (A * p.query.shape[1] + L * (A + p.keys.shape[2])))
        before = numba.get_num_threads()
        numba.set_num_threads(min(n, before))  # a 1-thread parallel region wakes no worker thread
        try:
            _attend(p.query, p.keys_proj, p.keys, p.w_q, p.v, p.lengths, p.context, p.weights)
        finally:
            numba.set_num_threads(before)
    return p.context, p.weights
