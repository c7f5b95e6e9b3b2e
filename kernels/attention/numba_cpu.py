"""Numba CPU attention: blocked over queries and keys with an online softmax.

Work items are (batch, head, query block) triples run in ``prange``. Each walks the key blocks its
queries can see (blocks wholly beyond ``lengths`` or the causal diagonal are never touched). Per key
block it forms the *transposed* score tile ``S^T = K_blk @ Q_blk^T`` ``[keys, queries]`` with BLAS
(``np.dot`` on contiguous tiles; both operands untransposed, OpenBLAS' fastest small-GEMM path),
updates each query's running max and sum (elementwise across the contiguous query axis, so it
vectorises), rescales that query's output accumulator when its max grows, and adds ``P @ V_blk``
(BLAS again). Extra memory is O(block) per work item, never O(Lq * Lk).

Scores are kept in base 2 (``q`` pre-scaled by ``scale * log2(e)``) so the exponential is the
vectorised :func:`exp2_nonpos`. BLAS is held to one thread while the kernel runs (see :mod:`_blas`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from seqjit.kernels import _scipy_blas

from . import spec
from ._blas import single_threaded_blas, tile_sizes
from ._fastexp import exp2_nonpos

_scipy_blas.require("the Numba attention kernel (np.dot)")

_LOG2E = 1.0 / math.log(2.0)
# reassociation lets LLVM vectorise sums; no 'nnan'/'ninf': -inf marks "no key seen yet"
_FASTMATH = {"reassoc", "nsz", "arcp", "contract"}


@njit(cache=True)
def _visible(lengths, b, i, causal, offset):
    """How many leading keys query ``i`` of batch row ``b`` sees (spec: a prefix ``[0, visible)``)."""
    nv = lengths[b]
    if causal:
        nv = min(nv, i + offset + 1)
    return max(nv, 0)


@njit(cache=True, fastmath=_FASTMATH)
def _online_softmax_tile(st, j0, nvis, full, mrow, lrow, cmax, alpha, zero):
    """One online-softmax step on the transposed base-2 score tile ``st`` ``[n keys, m queries]``.

    Key ``j0 + j`` is visible to query ``r`` iff ``j0 + j < nvis[r]`` (all of them when ``full``).
    Overwrites ``st`` with the unnormalised weights (0 where hidden), updates the running max
    ``mrow`` and sum ``lrow`` per query, and leaves in ``alpha[r]`` the factor by which query ``r``'s
    output accumulator must be rescaled.
    """
    n, m = st.shape
    for r in range(m):
        cmax[r] = mrow[r]
    if full:
        for j in range(n):
            row = st[j]
            for r in range(m):
                cmax[r] = max(cmax[r], row[r])
    else:
        for j in range(n):
            row = st[j]
            for r in range(m):
                if j0 + j < nvis[r]:
                    cmax[r] = max(cmax[r], row[r])
    for r in range(m):
        alpha[r] = exp2_nonpos(mrow[r] - cmax[r]) if cmax[r] > mrow[r] else 1
        lrow[r] *= alpha[r]
        mrow[r] = cmax[r]
    if full:
        for j in range(n):
            row = st[j]
            for r in range(m):
                e = exp2_nonpos(row[r] - cmax[r])
                row[r] = e
                lrow[r] += e
    else:
        for j in range(n):
            row = st[j]
            for r in range(m):
                e = exp2_nonpos(row[r] - cmax[r]) if j0 + j < nvis[r] else zero
                row[r] = e
                lrow[r] += e


@njit(parallel=True, cache=True, fastmath=_FASTMATH)
def _blocked(q, k, v, lengths, causal, qscale, out, bq, bk, zero):
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    Dv = v.shape[3]
    offset = Lk - Lq
    nqb = (Lq + bq - 1) // bq
    for task in prange(B * H * nqb):
        b = task // nqb // H
        h = task // nqb % H
        qb = task % nqb  # interleave light and heavy causal blocks (first, last, second, ...)
        qb = qb // 2 if qb % 2 == 0 else nqb - 1 - qb // 2
        i0 = qb * bq
        m = min(bq, Lq - i0)
        o = out[b, h, i0:i0 + m]
        o[:] = zero
        last = _visible(lengths, b, i0 + m - 1, causal, offset)  # widest row of the block
        if last == 0:
            continue
        first = _visible(lengths, b, i0, causal, offset)  # narrowest row
        qt = q[b, h, i0:i0 + m]
        qsT = np.empty((D, m), q.dtype)
        for r in range(m):
            for d in range(D):
                qsT[d, r] = qt[r, d] * qscale
        nvis = np.empty(m, np.int64)
        for r in range(m):
            nvis[r] = _visible(lengths, b, i0 + r, causal, offset)
        sbuf = np.empty(bk * m, q.dtype)
        t = np.empty((m, Dv), q.dtype)
        mrow = np.full(m, -np.inf, q.dtype)
        lrow = np.zeros(m, q.dtype)
        cmax = np.empty(m, q.dtype)
        alpha = np.empty(m, q.dtype)
        for j0 in range(0, last, bk):
            n = min(bk, last - j0)
            st = sbuf[:n * m].reshape(n, m)
            np.dot(k[b, h, j0:j0 + n], qsT, st)
            _online_softmax_tile(st, j0, nvis, j0 + n <= first, mrow, lrow, cmax, alpha, zero)
            np.dot(st.T, v[b, h, j0:j0 + n], t)
            for r in range(m):
                a = alpha[r]
                for d in range(Dv):
                    o[r, d] = o[r, d] * a + t[r, d]
        for r in range(m):
            inv = zero if lrow[r] == zero else 1 / lrow[r]
            for d in range(Dv):
                o[r, d] *= inv


@njit(cache=True, fastmath=_FASTMATH)
def _row_max(x, n):
    """max(x[:n]) with 8 independent accumulators (a single one is latency-bound; LLVM does not
    vectorise a float max reduction without 'nnan')."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(-np.inf)  # widens to x's dtype
    j = 0
    while j + 8 <= n:
        a0 = max(a0, x[j])
        a1 = max(a1, x[j + 1])
        a2 = max(a2, x[j + 2])
        a3 = max(a3, x[j + 3])
        a4 = max(a4, x[j + 4])
        a5 = max(a5, x[j + 5])
        a6 = max(a6, x[j + 6])
        a7 = max(a7, x[j + 7])
        j += 8
    mx = max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
    while j < n:
        mx = max(mx, x[j])
        j += 1
    return mx


@njit(parallel=True, cache=True, fastmath=_FASTMATH)
def _with_weights(q, k, v, lengths, causal, qscale, out, weights, bq, zero):
    """The ``return_weights`` path: each (batch, head, query block) writes its rows of the score
    matrix into ``weights``, normalises them in place (hidden keys -> 0), then ``out = weights @ v``."""
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    offset = Lk - Lq
    nqb = (Lq + bq - 1) // bq
    for task in prange(B * H * nqb):
        b = task // nqb // H
        h = task // nqb % H
        i0 = task % nqb * bq
        m = min(bq, Lq - i0)
        qt = q[b, h, i0:i0 + m]
        qs = np.empty((m, D), q.dtype)
        for r in range(m):
            for d in range(D):
                qs[r, d] = qt[r, d] * qscale
        w = weights[b, h, i0:i0 + m]
        np.dot(qs, k[b, h].T, w)
        for r in range(m):
            row = w[r]
            nv = _visible(lengths, b, i0 + r, causal, offset)
            mx = _row_max(row, nv)
            total = zero
            for j in range(nv):
                e = exp2_nonpos(row[j] - mx)
                row[j] = e
                total += e
            inv = zero if nv == 0 else 1 / total
            for j in range(nv):
                row[j] *= inv
            for j in range(nv, Lk):
                row[j] = zero
        np.dot(w, v[b, h], out[b, h, i0:i0 + m])


def attention(q, k, v, *, causal=False, lengths=None, scale=None, return_weights=False, out=None):
    """Blocked attention; see :mod:`seqjit.kernels.attention.spec` for arguments and shapes."""
    p = spec.prepare(q, k, v, causal=causal, lengths=lengths, scale=scale, return_weights=return_weights, out=out)
    B, H, Lq, Lk, D, Dv = p.shape
    if p.out.size == 0 and (p.weights is None or p.weights.size == 0):
        return p.result()
    if Lk == 0 or Dv == 0:
        p.out[...] = 0
        if p.return_weights:
            p.weights[...] = 0
        if Lk == 0 or not p.return_weights:
            return p.result()
    dtype = p.q.dtype.type
    qscale, zero = dtype(p.scale * _LOG2E), dtype(0)
    bq, bk = tile_sizes(Lq, Lk, D, Dv)  # see _blas.py
    with single_threaded_blas():
        if p.return_weights:
            _with_weights(p.q, p.k, p.v, p.lengths, p.causal, qscale, p.out, p.weights, bq, zero)
        else:
            _blocked(p.q, p.k, p.v, p.lengths, p.causal, qscale, p.out, bq, bk, zero)
    return p.result()
