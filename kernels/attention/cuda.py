"""numba.cuda attention (float32): online softmax over key tiles, causal and length masks.

Three kernels, all exact (same masking rule as :mod:`spec`):

- ``_tiled``: one block of ``TQ`` threads per (query tile, batch x head), one thread per query. The
  query tile (pre-scaled) and each ``TK``-key tile of K and V are staged in shared memory (K/V reads
  are then broadcasts); each thread keeps its running max, sum and output row. Key tiles beyond the
  block's widest visible prefix are skipped. Needs ``D, Dv <= 128``.
- ``_rowwise``: one block of up to ``RT`` threads per query row (fewer for short keys), for few
  queries (``Lq < 8``) and for large head sizes: threads score a block's width of keys at a time, the
  block reduces
  max and sum through shared memory, and each thread accumulates its own output columns (coalesced
  V reads). Needs ``Dv <= RT * _OUT_PER_THREAD``.
- ``_decode`` + ``_decode_combine``: one query per (batch row, head), ``Lq = 1``, the decode step's
  self- and cross-attention over a KV cache of capacity ``Lk`` with per-row ``lengths``. ``B * H``
  blocks alone would leave most of a GPU idle (batch 1, 8 heads: 8 blocks), so the keys are also
  split into ``S`` chunks of at most ``DEC_CHUNK`` keys, one block each (split-K, "flash decoding"):
  a block (up to ``DEC_T`` threads, about half the chunk's keys) scores its chunk, takes the chunk's
  max and sum through shared
  memory, and accumulates its unnormalised output columns (coalesced V reads); ``_decode_combine``
  rescales the ``S`` partial results by their maxima and adds them. With ``S = 1`` the block writes
  the final row itself. Chunks past a row's length do nothing. Needs ``D <= DEC_DMAX``.

The statistics and split-K partials are per-thread scratch buffers (``_cuda.scratch``): a decode step
allocates nothing. Every kernel also writes each row's max and sum, from which ``_weights`` recomputes the normalised
weights when ``return_weights``.

``lengths`` may be a device array (a decode loop's per-row lengths that never leave the GPU): its
shape and dtype are checked on the host, its values are not read there; the kernels clip them to
``[0, Lk]`` (a host ``lengths`` out of range is refused, as on every backend).

Host arrays in -> host arrays out; any device array in -> device arrays out (see
:mod:`seqjit.kernels._cuda`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from seqjit.kernels import _cuda
from seqjit.kernels._cuda_reduce import block_max, block_sum

from . import spec

TQ = 32  # queries (threads) per block of the tiled kernel
TK = 16  # keys per shared-memory tile
_DMAX = 128  # head sizes the tiled kernel stages in shared memory
_QS_COLS = _DMAX + 1  # padded: the threads' query rows fall in different shared-memory banks
RT = 128  # most threads per block of the row-wise kernel (a power of two; fewer for short keys)
_OUT_PER_THREAD = 8
_ROWWISE_BELOW = 8  # use the row-wise kernel when Lq < this
_NEG_INF = float32(-math.inf)
DEC_T = 128  # threads per block of the decode kernel (a power of two)
DEC_CHUNK = 256  # most keys per decode block (its shared score buffer)
DEC_MIN_CHUNK = 64  # fewest keys worth a block of their own when splitting
DEC_DMAX = 256  # head sizes the decode kernel stages in shared memory
DEC_TARGET_BLOCKS = 256  # blocks to aim for (a few per multiprocessor) when splitting the keys


@cuda.jit(device=True, inline=True)
def _visible(lengths, b, i, causal, offset, lk):
    """How many leading keys query ``i`` of batch row ``b`` sees (``lengths[b]`` clipped to [0, lk])."""
    nv = min(lengths[b], lk)
    if causal and i + offset + 1 < nv:
        nv = i + offset + 1
    return max(nv, 0)


@cuda.jit(fastmath=True)
def _tiled(q, k, v, lengths, causal, scale, out, mstat, lstat):
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    Dv = v.shape[3]
    bh = cuda.blockIdx.y
    b = bh // H
    h = bh % H
    i0 = cuda.blockIdx.x * TQ
    tid = cuda.threadIdx.x
    i = i0 + tid
    offset = Lk - Lq
    qs = cuda.shared.array((TQ, _QS_COLS), float32)
    ks = cuda.shared.array((TK, _DMAX), float32)
    vs = cuda.shared.array((TK, _DMAX), float32)
    acc = cuda.local.array(_DMAX, float32)
    sc = cuda.local.array(TK, float32)
    active = i < Lq
    nv = _visible(lengths, b, i, causal, offset, Lk) if active else 0
    last = _visible(lengths, b, min(i0 + TQ, Lq) - 1, causal, offset, Lk)  # the block's widest row
    if active:
        for d in range(D):
            qs[tid, d] = q[b, h, i, d] * scale
        for d in range(Dv):
            acc[d] = 0
    m = _NEG_INF
    total = float32(0)
    for j0 in range(0, last, TK):
        cuda.syncthreads()
        for idx in range(tid, TK * D, TQ):
            jj = idx // D
            ks[jj, idx % D] = k[b, h, j0 + jj, idx % D] if j0 + jj < Lk else float32(0)
        for idx in range(tid, TK * Dv, TQ):
            jj = idx // Dv
            vs[jj, idx % Dv] = v[b, h, j0 + jj, idx % Dv] if j0 + jj < Lk else float32(0)
        cuda.syncthreads()
        n = min(TK, nv - j0)
        if n > 0:
            mx = m
            for jj in range(n):
                s = float32(0)
                for d in range(D):
                    s += qs[tid, d] * ks[jj, d]
                sc[jj] = s
                mx = max(mx, s)
            alpha = math.exp(m - mx)  # 0 on the first visible tile (m = -inf)
            m = mx
            psum = float32(0)
            for jj in range(n):
                p = math.exp(sc[jj] - m)
                sc[jj] = p
                psum += p
            total = total * alpha + psum
            for d in range(Dv):
                a = acc[d] * alpha
                for jj in range(n):
                    a += sc[jj] * vs[jj, d]
                acc[d] = a
    if active:
        inv = float32(0) if total == 0 else float32(1) / total
        for d in range(Dv):
            out[b, h, i, d] = acc[d] * inv
        mstat[b, h, i] = m
        lstat[b, h, i] = total


@cuda.jit(fastmath=True)
def _rowwise(q, k, v, lengths, causal, scale, out, mstat, lstat):
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    Dv = v.shape[3]
    i = cuda.blockIdx.x
    bh = cuda.blockIdx.y
    b = bh // H
    h = bh % H
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x  # a power of two <= RT
    buf = cuda.shared.array(RT, float32)
    ps = cuda.shared.array(RT, float32)
    acc = cuda.local.array(_OUT_PER_THREAD, float32)
    nv = _visible(lengths, b, i, causal, Lk - Lq, Lk)
    for u in range(_OUT_PER_THREAD):
        acc[u] = 0
    m = _NEG_INF
    total = float32(0)
    for j0 in range(0, nv, nt):
        j = j0 + tid
        s = _NEG_INF
        if j < nv:
            s = float32(0)
            for d in range(D):
                s += q[b, h, i, d] * k[b, h, j, d]
            s *= scale
        mx = max(m, block_max(buf, tid, s))  # block max of this chunk
        alpha = math.exp(m - mx) if mx > m else float32(1)
        m = mx
        p = math.exp(s - m) if j < nv else float32(0)
        ps[tid] = p
        total = total * alpha + block_sum(buf, tid, p)  # block sum of this chunk (ps[] visible after its barriers)
        n = min(nt, nv - j0)
        for u in range(_OUT_PER_THREAD):
            d = tid + u * nt
            if d < Dv:
                a = acc[u] * alpha
                for jj in range(n):
                    a += ps[jj] * v[b, h, j0 + jj, d]
                acc[u] = a
        cuda.syncthreads()
    inv = float32(0) if total == 0 else float32(1) / total
    for u in range(_OUT_PER_THREAD):
        d = tid + u * nt
        if d < Dv:
            out[b, h, i, d] = acc[u] * inv
    if tid == 0:
        mstat[b, h, i] = m
        lstat[b, h, i] = total


@cuda.jit(fastmath=True)
def _decode(q, k, v, lengths, causal, scale, chunk, out, mstat, lstat, pacc, pm, pl):
    """``Lq = 1``: block ``(s, b * H + h)`` attends to keys ``[s * chunk, (s + 1) * chunk)`` of its row;
    one block per row (``gridDim.x == 1``) writes the result, else the partial ``pacc, pm, pl``."""
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    Dv = v.shape[3]
    s = cuda.blockIdx.x
    split = cuda.gridDim.x > 1
    bh = cuda.blockIdx.y
    b = bh // H
    h = bh % H
    tid = cuda.threadIdx.x
    qs = cuda.shared.array(DEC_DMAX, float32)
    sc = cuda.shared.array(DEC_CHUNK, float32)
    red = cuda.shared.array(DEC_T, float32)
    j0 = s * chunk
    n = min(chunk, _visible(lengths, b, 0, causal, Lk - 1, Lk) - j0)  # this block's keys (<= 0: none)
    nt = cuda.blockDim.x  # a power of two <= DEC_T
    for d in range(tid, D, nt):
        qs[d] = q[b, h, 0, d] * scale
    cuda.syncthreads()
    mx = _NEG_INF
    for jj in range(tid, n, nt):  # one thread per key
        t = float32(0)
        for d in range(D):
            t += qs[d] * k[b, h, j0 + jj, d]
        sc[jj] = t
        mx = max(mx, t)
    m = block_max(red, tid, mx)  # the chunk's max (sc[] visible after its barriers)
    psum = float32(0)
    for jj in range(tid, n, nt):
        e = math.exp(sc[jj] - m)
        sc[jj] = e
        psum += e
    total = block_sum(red, tid, psum)  # the chunk's sum
    inv = float32(0) if total == 0 else float32(1) / total
    for d in range(tid, Dv, nt):  # consecutive threads: consecutive columns of V
        a = float32(0)
        for jj in range(n):
            a += sc[jj] * v[b, h, j0 + jj, d]
        if split:
            pacc[bh, s, d] = a
        else:
            out[b, h, 0, d] = a * inv
    if tid == 0:
        if split:
            pm[bh, s] = m
            pl[bh, s] = total
        else:
            mstat[b, h, 0] = m
            lstat[b, h, 0] = total


@cuda.jit(fastmath=True)
def _decode_combine(pacc, pm, pl, out, mstat, lstat):
    """One block per (batch row, head): the ``S`` partial results rescaled to the common max and added."""
    H = out.shape[1]
    Dv = out.shape[3]
    S = pm.shape[1]
    bh = cuda.blockIdx.x
    b = bh // H
    h = bh % H
    m = _NEG_INF
    for s in range(S):
        m = max(m, pm[bh, s])
    total = float32(0)
    if m > _NEG_INF:  # else no key is visible: zeros
        for s in range(S):
            total += pl[bh, s] * math.exp(pm[bh, s] - m)
    inv = float32(0) if total == 0 else float32(1) / total
    for d in range(cuda.threadIdx.x, Dv, cuda.blockDim.x):
        a = float32(0)
        if total > 0:
            for s in range(S):
                a += pacc[bh, s, d] * math.exp(pm[bh, s] - m)
        out[b, h, 0, d] = a * inv
    if cuda.threadIdx.x == 0:
        mstat[b, h, 0] = m
        lstat[b, h, 0] = total


def decode_splits(rows: int, lk: int) -> tuple[int, int]:
    """``(S, chunk)``: the ``lk`` keys of each of ``rows`` (``B * H``) decode rows split into ``S``
    chunks of ``chunk`` keys: at most ``DEC_CHUNK`` keys a chunk, and enough chunks for about
    ``DEC_TARGET_BLOCKS`` blocks in all, while each keeps at least ``DEC_MIN_CHUNK`` keys."""
    if lk <= 0:
        return 1, 1
    need = -(-lk // DEC_CHUNK)
    want = min(-(-DEC_TARGET_BLOCKS // max(rows, 1)), -(-lk // DEC_MIN_CHUNK))
    chunk = -(-lk // max(need, want))
    return -(-lk // chunk), chunk


@cuda.jit(fastmath=True)
def _weights(q, k, lengths, causal, scale, mstat, lstat, weights):
    """weights[b, h, i, j] = exp(s_ij - m_i) / l_i on visible keys, else 0."""
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    i = cuda.blockIdx.y
    bh = cuda.blockIdx.z
    b = bh // H
    h = bh % H
    if j >= Lk:
        return
    w = float32(0)
    if j < _visible(lengths, b, i, causal, Lk - Lq, Lk) and lstat[b, h, i] > 0:
        s = float32(0)
        for d in range(D):
            s += q[b, h, i, d] * k[b, h, j, d]
        w = math.exp(s * scale - mstat[b, h, i]) / lstat[b, h, i]
    weights[b, h, i, j] = w


def _device_lengths(lengths, B: int):
    """A device ``lengths`` checked without reading it: shape ``[B]``, integers."""
    if len(lengths.shape) != 1 or lengths.shape[0] != B:
        raise ValueError(f"lengths must have shape [{B}] (one per batch row), got {list(lengths.shape)}")
    if np.dtype(lengths.dtype).kind not in "iu":
        raise TypeError(f"lengths must hold integers, got dtype {lengths.dtype}")
    return lengths


def attention(q, k, v, *, causal=False, lengths=None, scale=None, return_weights=False, out=None):
    """Attention on the GPU; see :mod:`seqjit.kernels.attention.spec` for arguments and shapes, and the
    module docstring for a device ``lengths``."""
    on_device = _cuda.any_on_device(q, k, v, out)
    device_lengths = lengths is not None and _cuda.is_device_array(lengths)
    p = spec.prepare(q, k, v, causal=causal, lengths=None if device_lengths else lengths, scale=scale,
                     return_weights=return_weights, out=out, device=True)
    dlen = _device_lengths(lengths, p.q.shape[0]) if device_lengths else None
    _cuda.require_float32("q", p.q)
    B, H, Lq, Lk, D, Dv = p.shape
    if Dv > RT * _OUT_PER_THREAD:
        raise ValueError(f"v must have a last dimension Dv <= {RT * _OUT_PER_THREAD} on the cuda backend, got {Dv}")
    dout = _cuda.device_out("out", out, p.out_shape, np.float32)
    dweights = _cuda.device_empty(p.weights_shape, np.float32) if p.return_weights else None
    if B * H * Lq > 0:
        dq, dk, dv = _cuda.to_device(p.q), _cuda.to_device(p.k), _cuda.to_device(p.v)
        if dlen is None:
            dlen = _cuda.to_device(p.lengths)
        mstat = _cuda.scratch("attention.m", (B, H, Lq), np.float32)
        lstat = _cuda.scratch("attention.l", (B, H, Lq), np.float32)
        scale32 = np.float32(p.scale)
        if Lq == 1 and D <= DEC_DMAX:
            splits, chunk = decode_splits(B * H, Lk)
            if splits > 1:
                pacc = _cuda.scratch("attention.pacc", (B * H, splits, Dv), np.float32)
                pm = _cuda.scratch("attention.pm", (B * H, splits), np.float32)
                pl = _cuda.scratch("attention.pl", (B * H, splits), np.float32)
            else:  # unused by an unsplit launch: views of the outputs stand in (no allocation)
                pacc = mstat.reshape(B * H, 1, 1)
                pm = pl = lstat.reshape(B * H, 1)
            nt = _cuda.threads_for(-(-max(chunk, D, Dv) // 2), DEC_T)
            _decode[(splits, B * H), nt](dq, dk, dv, dlen, p.causal, scale32, chunk, dout, mstat, lstat,
                                            pacc, pm, pl)
            if splits > 1:
                nt = _cuda.threads_for(Dv, DEC_T)
                _decode_combine[B * H, nt](pacc, pm, pl, dout, mstat, lstat)
        elif Lq < _ROWWISE_BELOW or D > _DMAX or Dv > _DMAX:
            # enough threads for the keys (up to RT) and for Dv (_OUT_PER_THREAD columns each)
            nt = _cuda.threads_for(max(min(RT, Lk), -(-Dv // _OUT_PER_THREAD)), RT)
            _rowwise[(Lq, B * H), nt](dq, dk, dv, dlen, p.causal, scale32, dout, mstat, lstat)
        else:
            _tiled[((Lq + TQ - 1) // TQ, B * H), TQ](dq, dk, dv, dlen, p.causal, scale32, dout, mstat, lstat)
        if p.return_weights and Lk > 0:
            nt = _cuda.threads_for(Lk, RT)
            _weights[(-(-Lk // nt), Lq, B * H), nt](dq, dk, dlen, p.causal, scale32, mstat, lstat, dweights)
    result = _cuda.finish(dout, out, on_device)
    if not p.return_weights:
        return result
    return result, (dweights if on_device else dweights.copy_to_host())
