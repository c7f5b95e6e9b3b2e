"""numba.cuda beam-search step (see :mod:`.reference` for what each kernel computes).

- :func:`beam_topk`: one block per source. Each thread keeps, in registers, the ``k2`` best of the
  candidates ``j = tid + nt i`` it scans (``total = logp + running score``, an insertion into a list
  kept best first, ties to the lower index); the lists go to shared memory and thread 0 merges them
  (``k2`` picks among ``nt`` list heads). ``nt * k2 <= _SHARED`` (2048): up to 128 threads, fewer for
  wide beams; ``k2 <= MAX_K2`` (64, a beam of 32).
- :func:`beam_advance`: one thread per source runs the step's bookkeeping (a few dozen values per
  source, and the token histories of its beams copied up to position ``t``).

Nothing here reads or writes host memory: the decode loop reads back only ``status``.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32, int64

from seqjit.kernels import _cuda

MAX_K = 32  # the widest beam the device kernels keep
MAX_K2 = 2 * MAX_K
_SHARED = 2048  # candidates staged in shared memory per block (nt * k2)
_THREADS = 128
NEG = float32(-1.0e9)


@cuda.jit(device=True, inline=True)
def _better(a, ia, b, ib):
    """Whether (a, ia) ranks before (b, ib): larger value first, NaN last, ties to the lower index."""
    if a != a:
        return b != b and ia < ib
    if b != b:
        return True
    return a > b or (a == b and ia < ib)


@cuda.jit(cache=False)
def _topk(logp, run_scores, active, k2, out_scores, out_index):
    s = cuda.blockIdx.x
    if active[s] == 0:
        return
    K = run_scores.shape[1]
    V = logp.shape[1]
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    lv = cuda.local.array(MAX_K2, float32)
    li = cuda.local.array(MAX_K2, int64)
    sv = cuda.shared.array(_SHARED, float32)
    si = cuda.shared.array(_SHARED, int64)
    cnt_s = cuda.shared.array(_THREADS, int32)
    cnt = 0
    for j in range(tid, K * V, nt):
        b = j // V
        x = logp[s * K + b, j - b * V] + run_scores[s, b]
        if cnt == k2 and not _better(x, j, lv[k2 - 1], li[k2 - 1]):
            continue
        p = cnt if cnt < k2 else k2 - 1  # the slot freed at the end, then shift the worse ones down
        while p > 0 and _better(x, j, lv[p - 1], li[p - 1]):
            lv[p] = lv[p - 1]
            li[p] = li[p - 1]
            p -= 1
        lv[p] = x
        li[p] = j
        if cnt < k2:
            cnt += 1
    for i in range(cnt):
        sv[tid * k2 + i] = lv[i]
        si[tid * k2 + i] = li[i]
    cnt_s[tid] = cnt
    cuda.syncthreads()
    if tid == 0:
        heads = cuda.local.array(_THREADS, int32)
        for u in range(nt):
            heads[u] = 0
        for o in range(k2):
            best = -1
            for u in range(nt):
                h = heads[u]
                if h < cnt_s[u]:
                    if best < 0 or _better(sv[u * k2 + h], si[u * k2 + h], sv[best * k2 + heads[best]],
                                           si[best * k2 + heads[best]]):
                        best = u
            if best < 0:
                break
            out_scores[s, o] = sv[best * k2 + heads[best]]
            out_index[s, o] = si[best * k2 + heads[best]]
            heads[best] += 1


def beam_topk(logp, run_scores, active, k2, out_scores, out_index):
    """The ``k2`` best candidates of each active source (device arrays; see :mod:`.reference`)."""
    n_src, K = run_scores.shape
    if not 1 <= k2 <= MAX_K2:
        raise ValueError(f"k2 must lie in [1, {MAX_K2}] on the cuda backend (a beam of at most {MAX_K}), got {k2}")
    if tuple(logp.shape[:1]) != (n_src * K,) or tuple(out_scores.shape) != (n_src, k2) or tuple(out_index.shape) != (n_src, k2):
        raise ValueError(f"logp must be [{n_src * K}, V] and the outputs [{n_src}, {k2}], got {list(logp.shape)}, "
                         f"{list(out_scores.shape)}, {list(out_index.shape)}")
    if k2 > K * logp.shape[1]:
        raise ValueError(f"k2 ({k2}) exceeds the {K * logp.shape[1]} candidates of a source")
    if n_src:
        nt = _cuda.threads_for(-(-K * logp.shape[1] // 8), min(_THREADS, _SHARED // k2))
        _topk[n_src, nt](logp, run_scores, active, k2, out_scores, out_index)
    return out_scores, out_index


@cuda.jit(cache=False)
def _advance(cand_scores, cand_index, vocab, t, max_len, eos_id, divisor, run_in, run_out, run_scores,
             fin_in, fin_out, fin_len, fin_scores, fin_done, active, status, src_rows, tokens):
    s = cuda.grid(1)
    n_src, K = run_scores.shape
    if s >= n_src:
        return
    if active[s] == 0:
        status[s] = 0
        for k in range(K):
            src_rows[s * K + k] = s * K + k
        return
    K2 = 2 * K
    cbeam = cuda.local.array(MAX_K2, int64)
    ctok = cuda.local.array(MAX_K2, int64)
    ends = cuda.local.array(MAX_K2, int32)
    masked = cuda.local.array(MAX_K2, float32)
    taken = cuda.local.array(MAX_K2 + MAX_K, int32)
    merged = cuda.local.array(MAX_K2 + MAX_K, float32)
    pick = cuda.local.array(MAX_K, int32)
    keep = cuda.local.array(MAX_K, int32)
    old_len = cuda.local.array(MAX_K, int64)
    old_done = cuda.local.array(MAX_K, int32)
    all_end = 1
    for c in range(K2):
        cbeam[c] = cand_index[s, c] // vocab
        ctok[c] = cand_index[s, c] - cbeam[c] * vocab
        e = ctok[c] == eos_id or t + 1 >= max_len
        ends[c] = 1 if e else 0
        if not e:
            all_end = 0
        masked[c] = cand_scores[s, c] + NEG if e else cand_scores[s, c]
    # running beams: the K best non-ending candidates (stable order)
    for c in range(K2):
        taken[c] = 0
    for k in range(K):
        best = -1
        for c in range(K2):
            if taken[c] == 0 and (best < 0 or _better(masked[c], c, masked[best], best)):
                best = c
        taken[best] = 1
        pick[k] = best
    # finished hypotheses: the K best of (kept ones, ending candidates among the first K)
    for k in range(K):
        merged[k] = fin_scores[s, k]
        old_len[k] = fin_len[s, k]
        old_done[k] = fin_done[s, k]
    for c in range(K2):
        x = cand_scores[s, c] / divisor
        if ends[c] == 0 or c >= K:
            x = x + NEG
        merged[K + c] = x
    for m in range(K + K2):
        taken[m] = 0
    for k in range(K):
        best = -1
        for m in range(K + K2):
            if taken[m] == 0 and (best < 0 or _better(merged[m], m, merged[best], best)):
                best = m
        taken[best] = 1
        keep[k] = best
    for k in range(K):
        m = keep[k]
        fin_scores[s, k] = merged[m]
        if m < K:
            fin_len[s, k] = old_len[m]
            fin_done[s, k] = old_done[m]
            for p in range(t + 1):
                fin_out[s, k, p] = fin_in[s, m, p]
        else:
            c = m - K
            fin_len[s, k] = t + 1
            fin_done[s, k] = 1 if (ends[c] == 1 and c < K) else 0
            for p in range(t):
                fin_out[s, k, p] = run_in[s, cbeam[c], p]
            fin_out[s, k, t] = ctok[c]
    for k in range(K):
        c = pick[k]
        for p in range(t):
            run_out[s, k, p] = run_in[s, cbeam[c], p]
        run_out[s, k, t] = ctok[c]
        run_scores[s, k] = masked[c]
        src_rows[s * K + k] = s * K + cbeam[c]
        tokens[s * K + k] = ctok[c]
    best_running = run_scores[s, 0] / divisor
    worst = fin_scores[s, 0]
    for k in range(1, K):
        worst = min(worst, fin_scores[s, k])
    improvable = 0
    for k in range(K):
        w = worst if fin_done[s, k] else NEG
        if best_running > w:
            improvable = 1
    status[s] = improvable + 2 * all_end
    active[s] = improvable


def beam_advance(cand_scores, cand_index, vocab, t, max_len, eos_id, divisor, run_tokens_in, run_tokens_out,
                 run_scores, fin_tokens_in, fin_tokens_out, fin_len, fin_scores, fin_done, active, status,
                 src_rows, tokens):
    """One step's bookkeeping on the device (every argument a device array but the scalars; see
    :mod:`.reference`)."""
    n_src, K = run_scores.shape
    if K > MAX_K:
        raise ValueError(f"beam_size must be at most {MAX_K} on the cuda backend, got {K}")
    if not 0 <= t < max_len:
        raise ValueError(f"t must lie in [0, {max_len}), got {t}")
    if n_src:
        _advance[_cuda.grid_1d(n_src, 64)](cand_scores, cand_index, int(vocab), int(t), int(max_len), int(eos_id),
                                           np.float32(divisor), run_tokens_in, run_tokens_out, run_scores,
                                           fin_tokens_in, fin_tokens_out, fin_len, fin_scores, fin_done, active,
                                           status, src_rows, tokens)
