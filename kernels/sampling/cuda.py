"""numba.cuda sampling: one token per row drawn on the device (see :mod:`.reference` for the
distribution).

One block per row (``row_threads(V, 256)`` threads, fewer under a wide top-k): the row max of
``scores / temperature`` (float64, as the CPU sampler computes); with a top-k filter, each thread's
best ``k`` in registers, merged by thread 0 into the sorted candidates (the k-th value is the
threshold; top-p cuts that sorted list); then an inverse CDF in vocabulary order over the kept
scores: each thread sums a contiguous chunk, thread 0 scans the chunk sums and draws ``u * total``
(``u`` the Philox draw of (seed, source row, step): :mod:`.philox`, the CPU samplers' stream), and
the thread whose chunk holds it finds the token.
"""
from __future__ import annotations

import math

from numba import cuda, float64, int64, uint64

from seqjit.kernels import _cuda
from seqjit.kernels._cuda_reduce import block_max

from . import philox

T = 256  # most threads per row (a power of two)

SAMPLE_MAX_K = 64  # the largest top-k filter sampled on the device (its candidates are staged in shared memory)
_SAMPLE_SHARED = 2048


_M0, _M1, _W0, _W1 = uint64(0xD2511F53), uint64(0xCD9E8D57), uint64(0x9E3779B9), uint64(0xBB67AE85)
_LO, _S32, _S11 = uint64(0xFFFFFFFF), uint64(32), uint64(11)


def philox_uniform(seed_lo, seed_hi, row, step):
    """The draw of :func:`.philox.uniforms` for one (source ``row``, ``step``) under the seed's two
    32-bit halves, in uint64 arithmetic only (a device function below; njit-able for the tests)."""
    r, s = uint64(row), uint64(step)
    c0, c1, c2, c3 = s & _LO, s >> _S32, r & _LO, r >> _S32
    k0, k1 = uint64(seed_lo), uint64(seed_hi)
    for i in range(10):
        if i > 0:
            k0 = (k0 + _W0) & _LO
            k1 = (k1 + _W1) & _LO
        p0 = _M0 * c0
        p1 = _M1 * c2
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ k0, p1 & _LO, (p0 >> _S32) ^ c3 ^ k1, p0 & _LO
    return float64(((c0 << _S32) | c1) >> _S11) * 1.1102230246251565e-16  # 2**-53


_philox_uniform = cuda.jit(device=True)(philox_uniform)


@cuda.jit
def _sample(scores, temperature, k, topp, seed_lo, seed_hi, sources, step, out):
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    vocab = scores.shape[1]
    red = cuda.shared.array(T, float64)
    sv = cuda.shared.array(_SAMPLE_SHARED, float64)
    si = cuda.shared.array(_SAMPLE_SHARED, int64)
    cnt_s = cuda.shared.array(T, int64)
    cut = cuda.shared.array(2, float64)  # the kept set: (x, -j) >= (cut[0], -cut[1]) lexicographically
    pick = cuda.shared.array(1, int64)
    lv = cuda.local.array(SAMPLE_MAX_K, float64)
    li = cuda.local.array(SAMPLE_MAX_K, int64)
    # the row max (of scores / temperature, in float64 as the CPU sampler computes)
    m = -math.inf
    for j in range(tid, vocab, nt):
        m = max(m, float64(scores[r, j]) / temperature)
    m = block_max(red, tid, m)
    if tid == 0:
        cut[0] = -math.inf
        cut[1] = float64(vocab)
    if k > 0:  # the k best (value desc, index asc): each thread's list, then thread 0 merges
        cnt = 0
        for j in range(tid, vocab, nt):
            x = float64(scores[r, j]) / temperature
            if cnt == k and not x > lv[k - 1]:
                continue
            p = cnt if cnt < k else k - 1
            while p > 0 and x > lv[p - 1]:
                lv[p] = lv[p - 1]
                li[p] = li[p - 1]
                p -= 1
            lv[p] = x
            li[p] = j
            if cnt < k:
                cnt += 1
        for i in range(cnt):
            sv[tid * k + i] = lv[i]
            si[tid * k + i] = li[i]
        cnt_s[tid] = cnt
        cuda.syncthreads()
        if tid == 0:
            heads = cuda.local.array(T, int64)
            for u in range(nt):
                heads[u] = 0
            total = 0.0  # the list's own mass (about the row max); top-p normalises over the kept set
            n = 0
            for o in range(k):
                best = -1
                for u in range(nt):
                    h = heads[u]
                    if h < cnt_s[u]:
                        a, ia = sv[u * k + h], si[u * k + h]
                        if best < 0:
                            best = u
                        else:
                            b, ib = sv[best * k + heads[best]], si[best * k + heads[best]]
                            if a > b or (a == b and ia < ib):
                                best = u
                if best < 0:
                    break
                lv[o] = sv[best * k + heads[best]]
                li[o] = si[best * k + heads[best]]
                heads[best] += 1
                n += 1
            # top-k: every score >= the k-th largest (ties included, as numpy.partition's threshold)
            cut[0] = lv[n - 1]
            cut[1] = float64(vocab)
            if topp < 1.0:
                for o in range(n):
                    total += math.exp(lv[o] - m)
                before = 0.0
                for o in range(n):
                    if o > 0 and before >= topp:
                        break
                    cut[0] = lv[o]
                    cut[1] = float64(li[o])
                    before += math.exp(lv[o] - m) / total
    cuda.syncthreads()
    # inverse CDF in vocabulary order over the kept set: each thread a contiguous chunk
    chunk = (vocab + nt - 1) // nt
    lo = tid * chunk
    hi = min(vocab, lo + chunk)
    s = 0.0
    for j in range(lo, hi):
        x = float64(scores[r, j]) / temperature
        if x > cut[0] or (x == cut[0] and j <= cut[1]):
            s += math.exp(x - m)
    red[tid] = s
    cuda.syncthreads()
    if tid == 0:
        acc = 0.0
        for u in range(nt):  # exclusive scan of the chunk sums
            v = red[u]
            red[u] = acc
            acc += v
        sv[0] = _philox_uniform(seed_lo, seed_hi, sources[r], step) * acc
        pick[0] = vocab - 1
    cuda.syncthreads()
    target = sv[0]
    if lo < hi and red[tid] <= target:
        c = red[tid]
        for j in range(lo, hi):
            x = float64(scores[r, j]) / temperature
            if x > cut[0] or (x == cut[0] and j <= cut[1]):
                c += math.exp(x - m)
                if c > target:
                    cuda.atomic.min(pick, 0, j)
                    break
    cuda.syncthreads()
    if tid == 0:
        out[r] = pick[0]


def sample_rows(scores, *, temperature=1.0, topk=0, topp=1.0, seed, sources, step, out):
    """One token per row of ``scores`` [R, V] (the processed scores, -inf where banned) drawn as
    :func:`seqjit.decoding.processors.sample` draws it: ``scores / temperature``, then the top-k filter
    (``0 < topk < V``; ties at the k-th value kept), then top-p (nucleus, over the scores sorted best
    first, ties by index), then the inverse CDF of the kept scores' softmax in vocabulary order, at
    the Philox draw of (``seed``, ``sources[r]``, ``step``) (``sources``: a device int64 [R], each
    row's index in the caller's batch). On the device; ``out`` int64 [R] written.

    Top-p needs a top-k filter of at most ``SAMPLE_MAX_K`` (the caller runs the host sampler otherwise);
    a top-k of 1 - 64 is exact, except that under top-p, exact float ties with the k-th score beyond the
    k listed ones are left out of the nucleus."""
    rows, vocab = int(scores.shape[0]), int(scores.shape[1])
    k = int(topk) if 0 < int(topk) < vocab else 0
    if k > SAMPLE_MAX_K or (topp < 1.0 and k == 0):
        raise ValueError(f"the device sampler takes top-k <= {SAMPLE_MAX_K} (and a top-k filter with top-p), "
                         f"got topk={topk}, topp={topp}")
    if rows:
        nt = _cuda.row_threads(vocab, T)
        if k:
            nt = min(nt, _SAMPLE_SHARED // k)
        seed = philox.check_seed(seed)
        _sample[rows, nt](scores, float(temperature), k, float(topp), seed & 0xFFFFFFFF, seed >> 32, sources,
                          int(step), out)
    return out
