"""numba.cuda decoding-step kernels: greedy_argmax, the score processors and the greedy bookkeeping.

``greedy_argmax``: one block per row, the greedy token chosen on the device. A decode loop that keeps
its logits on the GPU sends only the chosen ids back (``R`` int64 values, not ``R x V`` floats). Each
of the ``T`` threads of a row's block (at most 256, about V / 8 for a small vocabulary) scans the
columns ``j = tid + T i`` (coalesced), skipping the forbidden ones (the end token while banned, and
the suppressed ids, read from the device), and keeps its first NaN and its first largest score; the
block then reduces the ``T`` candidates through shared memory to the index numpy.argmax picks (see
:mod:`spec`). Host arrays in -> host array out; a device array in -> device array out.

``ban_tokens``, ``repetition_penalty``, ``no_repeat_ngram`` (a thread per row and history) and
``greedy_advance`` (a block per row when scores are kept: the log-softmax of the chosen token),
``force_prefix`` and ``prefix_running`` (a ``target_prefix``: a thread per score, per row) work on
device arrays in place; see :mod:`.reference`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, float64, int64

from seqjit.kernels import _cuda
from seqjit.kernels._cuda_reduce import block_sum

from . import spec

T = 256  # threads per row (a power of two)
_NEG_INF = float32(-math.inf)


@cuda.jit
def _argmax_rows(logits, suppressed, ban_id, out):
    r = cuda.blockIdx.x
    vocab = logits.shape[1]
    nsup = suppressed.shape[0]
    tid = cuda.threadIdx.x
    best = cuda.shared.array(T, float32)
    best_at = cuda.shared.array(T, int64)
    nan_at = cuda.shared.array(T, int64)
    bv = _NEG_INF
    bi = vocab  # none yet
    ni = vocab
    nt = cuda.blockDim.x  # a power of two <= T
    for j in range(tid, vocab, nt):
        if j == ban_id:
            continue
        forbidden = False
        for s in range(nsup):
            if suppressed[s] == j:
                forbidden = True
        if forbidden:
            continue
        x = logits[r, j]
        if x != x:
            if ni == vocab:
                ni = j
        elif x > bv:  # strictly: a thread keeps its first largest
            bv = x
            bi = j
    best[tid] = bv
    best_at[tid] = bi
    nan_at[tid] = ni
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if tid < step:
            o = tid + step
            if nan_at[o] < nan_at[tid]:
                nan_at[tid] = nan_at[o]
            if best[o] > best[tid] or (best[o] == best[tid] and best_at[o] < best_at[tid]):
                best[tid] = best[o]
                best_at[tid] = best_at[o]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        if nan_at[0] < vocab:
            out[r] = nan_at[0]
        elif best_at[0] < vocab:
            out[r] = best_at[0]
        else:  # every score -inf: numpy.argmax gives the first index
            out[r] = 0


def greedy_argmax(logits, *, suppressed=(), eos_id=-1, step=0, min_length=0, out=None):
    """The greedy token of each row on the GPU; see :mod:`seqjit.kernels.decode_step.spec`."""
    on_device = _cuda.any_on_device(logits, out)
    logits, suppressed, ban_id, _ = spec.prepare(logits, suppressed, eos_id, step, min_length, out, device=True)
    _cuda.require_float32("logits", logits)
    rows = int(logits.shape[0])
    dout = _cuda.device_out("out", out, (rows,), np.int64)
    if rows:
        if suppressed.shape[0] == 0:
            suppressed = np.full(1, -1, np.int64)  # (an empty array cannot be uploaded everywhere): matches nothing
        _argmax_rows[rows, _cuda.row_threads(logits.shape[1], T)](_cuda.to_device(logits), _cuda.to_device(suppressed), ban_id, dout)
    return _cuda.finish(dout, out, on_device)


# -- the score processors and the greedy bookkeeping (see reference.py) -----------------------------
# Device arrays in, updated in place; ``tokens`` [R, >= t] holds each row's generated tokens (the
# history is ``[start_id] + tokens[r, :t]``). Scalars are launch arguments: nothing crosses.

@cuda.jit
def _ban(scores, suppressed, ban_id):
    idx = cuda.grid(1)
    rows, vocab = scores.shape
    n = suppressed.shape[0] + 1
    if idx >= rows * n:
        return
    r = idx // n
    k = idx - r * n
    i = suppressed[k] if k < n - 1 else ban_id
    if 0 <= i < vocab:
        scores[r, i] = _NEG_INF


def ban_tokens(scores, suppressed, ban_id):
    """``scores[:, i] = -inf`` for the ids of the device array ``suppressed`` and ``ban_id`` (>= 0)."""
    n = scores.shape[0] * (suppressed.shape[0] + 1)
    if n:
        _ban[_cuda.grid_1d(n, 128)](scores, suppressed, int(ban_id))
    return scores


@cuda.jit(device=True, inline=True)
def _hist(start_id, tokens, r, p):
    return start_id if p == 0 else tokens[r, p - 1]


@cuda.jit
def _repetition(scores, start_id, tokens, t, penalty):
    r = cuda.grid(1)
    if r >= scores.shape[0]:
        return
    for p in range(t + 1):
        tok = _hist(start_id, tokens, r, p)
        seen = False
        for q in range(p):
            if _hist(start_id, tokens, r, q) == tok:
                seen = True
                break
        if not seen:
            x = scores[r, tok]
            scores[r, tok] = x * penalty if x < 0 else x / penalty


def repetition_penalty(scores, start_id, tokens, t, penalty):
    """Each token of a row's history, once: its score divided by ``penalty`` (multiplied when negative)."""
    if scores.shape[0]:
        _repetition[_cuda.grid_1d(scores.shape[0], 64)](scores, int(start_id), tokens, int(t), np.float32(penalty))
    return scores


@cuda.jit
def _ngram(scores, start_id, tokens, t, n):
    r = cuda.grid(1)
    if r >= scores.shape[0]:
        return
    length = t + 1
    if n == 1:
        for p in range(length):
            scores[r, _hist(start_id, tokens, r, p)] = _NEG_INF
        return
    if length + 1 < n:
        return
    for start in range(length - n + 1):
        same = True
        for i in range(n - 1):
            if _hist(start_id, tokens, r, start + i) != _hist(start_id, tokens, r, length - n + 1 + i):
                same = False
                break
        if same:
            scores[r, _hist(start_id, tokens, r, start + n - 1)] = _NEG_INF


def no_repeat_ngram(scores, start_id, tokens, t, n):
    """-inf for every token that would repeat an n-gram of the row's history."""
    if scores.shape[0] and n > 0:
        _ngram[_cuda.grid_1d(scores.shape[0], 64)](scores, int(start_id), tokens, int(t), int(n))
    return scores


@cuda.jit
def _advance_plain(tokens, eos_id, t, done, history):
    r = cuda.grid(1)
    if r < tokens.shape[0]:
        history[r, t] = tokens[r]
        if tokens[r] == eos_id:
            done[r] = 1


@cuda.jit
def _advance_scored(scores, tokens, eos_id, t, done, history, total):
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    vocab = scores.shape[1]
    buf = cuda.shared.array(T, float32)
    flag = cuda.shared.array(T, int64)
    m = _NEG_INF
    nan = 0
    for j in range(tid, vocab, nt):
        x = scores[r, j]
        if x != x:
            nan = 1
        elif x > m:
            m = x
    buf[tid] = m
    flag[tid] = nan
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if tid < step:
            buf[tid] = max(buf[tid], buf[tid + step])
            flag[tid] = max(flag[tid], flag[tid + step])
        cuda.syncthreads()
        step //= 2
    m = buf[0]
    if flag[0] != 0 or m == _NEG_INF or m == -_NEG_INF:  # numpy: a NaN or infinite max shifts by 0
        m = float32(0.0)
    cuda.syncthreads()
    s = float32(0.0)
    for j in range(tid, vocab, nt):
        s += math.exp(scores[r, j] - m)
    s = block_sum(buf, tid, s)
    if tid == 0:
        tok = tokens[r]
        if done[r] == 0:
            lse = math.log(s) if s > 0 else _NEG_INF  # log 0 (the simulator's math.log would raise)
            total[r] += float64((scores[r, tok] - m) - lse)
        history[r, t] = tok
        if tok == eos_id:
            done[r] = 1


def greedy_advance(scores, tokens, eos_id, t, done, history, total=None):
    """After a greedy step: ``history[:, t] = tokens``, the chosen tokens' log-probabilities added to
    ``total`` (float64) for rows not ``done`` (``total`` None: no scores), ``done`` set where a row ended."""
    rows = tokens.shape[0]
    if rows == 0:
        return done
    if total is None:
        _advance_plain[_cuda.grid_1d(rows, 64)](tokens, int(eos_id), int(t), done, history)
    else:
        _advance_scored[rows, _cuda.row_threads(scores.shape[1], T)](
            scores, tokens, int(eos_id), int(t), done, history, total)
    return done


@cuda.jit
def _force(scores, prefix, t):
    idx = cuda.grid(1)
    rows, vocab = scores.shape
    if idx >= rows * vocab:
        return
    r = idx // vocab
    j = idx - r * vocab
    tok = prefix[r, t]
    if tok >= 0:
        scores[r, j] = float32(0.0) if j == tok else _NEG_INF


@cuda.jit
def _running(done, prefix, t):
    r = cuda.grid(1)
    if r < done.shape[0] and prefix[r, t] >= 0:
        done[r] = 0


def force_prefix(scores, prefix, t):
    """Device ``scores`` [R, V] with each row forced at step ``t`` by the device ``prefix`` [R, P]
    (see :mod:`.reference`), in place; nothing runs when ``t >= P``."""
    n = scores.shape[0] * scores.shape[1]
    if t < prefix.shape[1] and n:
        _force[_cuda.grid_1d(n, 256)](scores, prefix, int(t))
    return scores


def prefix_running(done, prefix, t):
    """Device ``done`` [R] cleared for the rows forced at step ``t`` (see :mod:`.reference`)."""
    rows = done.shape[0]
    if t < prefix.shape[1] and rows:
        _running[_cuda.grid_1d(rows, 64)](done, prefix, int(t))
    return done
