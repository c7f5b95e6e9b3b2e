"""numba.cuda greedy_argmax: one block per row, the greedy token chosen on the device.

A decode loop that keeps its logits on the GPU sends only the chosen ids back (``R`` int64 values,
not ``R x V`` floats). Each of the ``T`` threads of a row's block scans the columns ``j = tid + T i``
(coalesced), skipping the forbidden ones (the end token while banned, and the suppressed ids, read
from the device), and keeps its first NaN and its first largest score; the block then reduces the
``T`` candidates through shared memory to the index numpy.argmax picks (see :mod:`spec`). Host
arrays in -> host array out; a device array in -> device array out.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, int64

from seqjit.kernels import _cuda

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
    for j in range(tid, vocab, T):
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
    step = T // 2
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
    """The greedy token of each row on the GPU; see :mod:`seqjit.kernels.decoding.spec`."""
    on_device = _cuda.any_on_device(logits, out)
    logits, suppressed, ban_id, _ = spec.prepare(logits, suppressed, eos_id, step, min_length, out, device=True)
    _cuda.require_float32("logits", logits)
    rows = int(logits.shape[0])
    dout = _cuda.device_out("out", out, (rows,), np.int64)
    if rows:
        if suppressed.shape[0] == 0:
            suppressed = np.full(1, -1, np.int64)  # (an empty array cannot be uploaded everywhere): matches nothing
        _argmax_rows[rows, T](_cuda.to_device(logits), _cuda.to_device(suppressed), ban_id, dout)
    return _cuda.finish(dout, out, on_device)
