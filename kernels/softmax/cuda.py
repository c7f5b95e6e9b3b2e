"""numba.cuda softmax / log_softmax: one thread block per row, shared-memory tree reductions.

Non-finite rows (:mod:`spec`) leave the normal path on a non-finite row max (+inf; or -inf, where
the max ignored any NaN, so a block-wide NaN search follows) or a NaN sum of exponentials.

One block per row of ``row_threads(n, 128)`` threads (a power of two, 8 or more columns each: short
rows get small blocks).

Host arrays in -> host array out; a device array in -> device array out (see seqjit.kernels._cuda).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as _layout
from seqjit.kernels._cuda_reduce import block_max, block_sum

from . import spec

_THREADS = 128
_no_mask = None  # a device [1, 1] array standing in for an absent mask (made once)


@cuda.jit(cache=False)
def _softmax_rows(x, mask, has_mask, out, use_log):
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    buf = cuda.shared.array(_THREADS, float32)
    # 1) row max over kept elements
    m = -math.inf
    for j in range(tid, n, nt):
        if (not has_mask or mask[r, j]) and x[r, j] > m:
            m = x[r, j]
    m = block_max(buf, tid, m)
    if m == math.inf or m == -math.inf:  # (the same branch in every thread of the block)
        found = 0.0
        for j in range(tid, n, nt):
            if (not has_mask or mask[r, j]) and x[r, j] != x[r, j]:
                found = 1.0
        found = block_max(buf, tid, found)
        value = math.nan if (m == math.inf or found > 0) else (-math.inf if use_log else 0.0)
        for j in range(tid, n, nt):
            out[r, j] = value
        return
    # 2) sum of exponentials
    s = 0.0
    for j in range(tid, n, nt):
        if not has_mask or mask[r, j]:
            s += math.exp(x[r, j] - m)
    total = block_sum(buf, tid, s)
    if total != total:  # a kept NaN
        for j in range(tid, n, nt):
            out[r, j] = math.nan
        return
    # 3) write
    if use_log:
        lse = m + math.log(total)
        for j in range(tid, n, nt):
            out[r, j] = (x[r, j] - lse) if (not has_mask or mask[r, j]) else -math.inf
    else:
        inv = 1.0 / total
        for j in range(tid, n, nt):
            out[r, j] = math.exp(x[r, j] - m) * inv if (not has_mask or mask[r, j]) else 0.0


def _run(x, mask, out, use_log):
    on_device = _cuda.any_on_device(x, out)
    x2, m2, _, shape = spec.prepare(x, mask, None, device=True)
    _cuda.require_float32("x", x2)
    rows, n = x2.shape
    dout = _cuda.device_out("out", out, shape, x2.dtype)
    if rows and n:
        global _no_mask
        if m2 is None and _no_mask is None:
            _no_mask = _layout.zeros((1, 1), np.uint8)
        dmask = _cuda.to_device(m2) if m2 is not None else _no_mask
        _softmax_rows[rows, _cuda.row_threads(n, _THREADS)](_cuda.to_device(x2), dmask, m2 is not None, dout.reshape(rows, n), use_log)
    return _cuda.finish(dout, out, on_device)


def softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, False)


def log_softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, True)
