"""numba.cuda linear: a tiled GEMM, and a GEMV path for the few rows of a decode step; the bias +
activation fused into the epilogue of both.

**Tiled GEMM** (more than ``GEMV_MAX_ROWS`` rows). Each thread block computes a ``TILE_M x TILE_N`` (64 x 64) tile of ``out``, stepping through K in
``TILE_K`` (16) slices staged in shared memory; each of its 16 x 16 threads accumulates a 4 x 4
register tile (rows ``ty + 16 i``, columns ``tx + 16 j``: conflict-free shared reads and coalesced
writes). Loads are coalesced for both weight layouts. The epilogue adds the bias and applies the
activation (the device function of :mod:`seqjit.kernels.activations`) before the only write of
``out``.

**GEMV / skinny GEMM** (``M <= GEMV_MAX_ROWS`` = 16 rows: a decode step of batch 1-16, where a
64-row tile would leave most of its threads idle). The work is split along N and K, every weight
element is read once, by one thread, for all M rows (kept in a register array):

- ``out_in`` weight ``[N, K]``: one group of ``_LANES`` (32) threads per output column, the lanes
  striding along K (coalesced reads of the weight's row); ``_COLS`` (4) columns per block.
- ``in_out`` weight ``[K, N]``: ``_LANES`` consecutive columns per block, one thread each (coalesced
  reads of the weight's rows), and ``_KSLICES`` (8) groups of threads splitting K.

Below those sizes (K < 128 or N < 32, a tiny model) the groups shrink to a power of two covering the
work (4 or more elements of K a lane) and a block takes more columns, so no thread is launched idle.

The partial sums of each (row, column) are added in shared memory (in a fixed order: the result does
not depend on timing) and the epilogue writes ``out`` once. Chosen automatically by ``M``.

Host arrays in -> host array out; a device array in -> device array out.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32

from seqjit.kernels import _cuda
from seqjit.kernels.activations.cuda import activate

from . import spec

TILE_M = 64
TILE_N = 64
TILE_K = 16
_T = 16  # threads per block side: 16 x 16 threads, 4 x 4 outputs each
_R = TILE_M // _T

GEMV_MAX_ROWS = 16  # rows (M) up to which the GEMV kernels run instead of the tiled GEMM
_LANES = 32  # threads along K (out_in) or along N (in_out)
_COLS = 4  # out_in: output columns per block
_KSLICES = 8  # in_out: slices of K per block


@cuda.jit(cache=False)
def _gemm_bias_act(x, w, bias, has_bias, out_in, code, out):
    m, k = x.shape
    n = out.shape[1]
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tid = ty * _T + tx
    row0 = cuda.blockIdx.y * TILE_M
    col0 = cuda.blockIdx.x * TILE_N
    a_s = cuda.shared.array((TILE_M, TILE_K + 1), float32)
    b_s = cuda.shared.array((TILE_K, TILE_N + 1), float32)
    acc = cuda.local.array((_R, _R), float32)
    for i in range(_R):
        for j in range(_R):
            acc[i, j] = float32(0.0)
    for k0 in range(0, k, TILE_K):
        # stage x[row0:+64, k0:+16] and the matching weight slice (zeros outside the matrices)
        for l in range(_R):
            idx = tid + l * _T * _T
            r = idx // TILE_K
            kk = idx % TILE_K
            gr = row0 + r
            gk = k0 + kk
            a_s[r, kk] = x[gr, gk] if (gr < m and gk < k) else float32(0.0)
            if out_in:  # w[N, K]: consecutive threads read consecutive k
                c = idx // TILE_K
                kb = idx % TILE_K
                gc = col0 + c
                gk = k0 + kb
                b_s[kb, c] = w[gc, gk] if (gc < n and gk < k) else float32(0.0)
            else:  # w[K, N]: consecutive threads read consecutive n
                kb = idx // TILE_N
                c = idx % TILE_N
                gc = col0 + c
                gk = k0 + kb
                b_s[kb, c] = w[gk, gc] if (gc < n and gk < k) else float32(0.0)
        cuda.syncthreads()
        for kk in range(TILE_K):
            a0 = a_s[ty, kk]
            a1 = a_s[ty + _T, kk]
            a2 = a_s[ty + 2 * _T, kk]
            a3 = a_s[ty + 3 * _T, kk]
            for j in range(_R):
                b = b_s[kk, tx + j * _T]
                acc[0, j] += a0 * b
                acc[1, j] += a1 * b
                acc[2, j] += a2 * b
                acc[3, j] += a3 * b
        cuda.syncthreads()
    for i in range(_R):
        gr = row0 + ty + i * _T
        if gr < m:
            for j in range(_R):
                gc = col0 + tx + j * _T
                if gc < n:
                    v = acc[i, j]
                    if has_bias:
                        v += bias[gc]
                    out[gr, gc] = activate(v, code) if code else v


@cuda.jit(cache=False)
def _gemv_out_in(x, w, bias, has_bias, code, out):
    """``M <= GEMV_MAX_ROWS``, weight ``[N, K]``: block (lanes along K, at least M) x (columns)."""
    m, k = x.shape
    n = out.shape[1]
    lane = cuda.threadIdx.x
    lanes = cuda.blockDim.x
    g = cuda.threadIdx.y
    col = cuda.blockIdx.x * cuda.blockDim.y + g
    part = cuda.shared.array(_COLS * GEMV_MAX_ROWS * _LANES, float32)
    acc = cuda.local.array(GEMV_MAX_ROWS, float32)
    for r in range(m):
        acc[r] = float32(0.0)
    if col < n:
        for kk in range(lane, k, lanes):
            wv = w[col, kk]
            for r in range(m):
                acc[r] += x[r, kk] * wv
    base = g * GEMV_MAX_ROWS * lanes
    for r in range(m):
        part[base + r * lanes + lane] = acc[r]
    cuda.syncthreads()
    if col < n:
        for r in range(lane, m, lanes):  # lane l adds up rows l, l + lanes, ... of this column
            v = float32(0.0)
            for l in range(lanes):
                v += part[base + r * lanes + l]
            if has_bias:
                v += bias[col]
            out[r, col] = activate(v, code) if code else v


@cuda.jit(cache=False)
def _gemv_in_out(x, w, bias, has_bias, code, out):
    """``M <= GEMV_MAX_ROWS``, weight ``[K, N]``: block (columns) x (slices of K)."""
    m, k = x.shape
    n = out.shape[1]
    tx = cuda.threadIdx.x
    lanes = cuda.blockDim.x
    ks = cuda.threadIdx.y
    kslices = cuda.blockDim.y
    col = cuda.blockIdx.x * lanes + tx
    part = cuda.shared.array(_KSLICES * GEMV_MAX_ROWS * _LANES, float32)
    acc = cuda.local.array(GEMV_MAX_ROWS, float32)
    for r in range(m):
        acc[r] = float32(0.0)
    if col < n:
        for kk in range(ks, k, kslices):
            wv = w[kk, col]
            for r in range(m):
                acc[r] += x[r, kk] * wv
    for r in range(m):
        part[(ks * GEMV_MAX_ROWS + r) * lanes + tx] = acc[r]
    cuda.syncthreads()
    if col < n:
        for r in range(ks, m, kslices):  # slice ks finishes rows ks, ks + kslices, ...
            v = float32(0.0)
            for j in range(kslices):
                v += part[(j * GEMV_MAX_ROWS + r) * lanes + tx]
            if has_bias:
                v += bias[col]
            out[r, col] = activate(v, code) if code else v


@cuda.jit(cache=False)
def _fill_bias_act(bias, has_bias, code, out):
    """K == 0: ``out = activation(bias)`` (or activation(0))."""
    i = cuda.grid(1)
    m, n = out.shape
    if i < m * n:
        v = bias[i % n] if has_bias else float32(0.0)
        out[i // n, i % n] = activate(v, code) if code else v


def linear(x, weight, bias=None, *, activation=None, weight_layout="out_in", out=None):
    on_device = _cuda.any_on_device(x, weight, bias, out)
    x2, w, b, code, out_in, _, shape = spec.prepare(x, weight, bias, activation, weight_layout, out, device=True)
    _cuda.require_float32("x", x2)
    m, k = x2.shape
    n = shape[-1]
    dout = _cuda.device_out("out", out, shape, x2.dtype)
    if m and n:
        o2 = dout.reshape(m, n)
        db = _cuda.to_device(b) if b is not None else o2[0]  # (no bias: a row of out stands in, never read)
        if k == 0:
            _fill_bias_act[_cuda.grid_1d(m * n)](db, b is not None, code, o2)
        elif m <= GEMV_MAX_ROWS and out_in:
            lanes = _cuda.threads_for(-(-k // 4), _LANES)
            cols = _cuda.threads_for(n, (_COLS * _LANES) // lanes)  # at most 128 threads a block
            _gemv_out_in[(n + cols - 1) // cols, (lanes, cols)](
                _cuda.to_device(x2), _cuda.to_device(w), db, b is not None, code, o2
            )
        elif m <= GEMV_MAX_ROWS:
            lanes, kslices = _cuda.threads_for(n, _LANES), _cuda.threads_for(k, _KSLICES)
            _gemv_in_out[(n + lanes - 1) // lanes, (lanes, kslices)](
                _cuda.to_device(x2), _cuda.to_device(w), db, b is not None, code, o2
            )
        else:
            grid = ((n + TILE_N - 1) // TILE_N, (m + TILE_M - 1) // TILE_M)
            _gemm_bias_act[grid, (_T, _T)](
                _cuda.to_device(x2), _cuda.to_device(w), db, b is not None, out_in, code, o2
            )
    return _cuda.finish(dout, out, on_device)
