"""numba.cuda additive_attention (float32): three launches with the data kept on the device,
``qp = query @ w_q.T`` (one thread per (b, a)), the scores (one thread per (b, j)), and one block per
batch row (up to 128 threads, fewer for a short source) for the masked softmax (shared-memory
max/sum reductions) and the context (threads over Dk).

Host arrays in -> host arrays out; any device array in -> device arrays out (see seqjit.kernels._cuda).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from seqjit.kernels import _cuda
from seqjit.kernels._cuda_reduce import block_max, block_sum

from . import spec

_THREADS = 128


@cuda.jit(cache=False)
def _project(query, w_q, qp):
    idx = cuda.grid(1)
    B, A = qp.shape
    if idx < B * A:
        b = idx // A
        a = idx - b * A
        acc = float32(0.0)
        for d in range(query.shape[1]):
            acc += w_q[a, d] * query[b, d]
        qp[b, a] = acc


@cuda.jit(cache=False)
def _scores(qp, keys_proj, v, lengths, scores):
    idx = cuda.grid(1)
    B, L, A = keys_proj.shape
    if idx < B * L:
        b = idx // L
        j = idx - b * L
        if j < lengths[b]:  # (j < L: a device length above L reads nothing beyond)
            e = float32(0.0)
            for a in range(A):
                e += v[a] * math.tanh(qp[b, a] + keys_proj[b, j, a])
            scores[b, j] = e


@cuda.jit(cache=False)
def _softmax_context(scores, keys, lengths, weights, context):
    b = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    L = scores.shape[1]
    Dk = keys.shape[2]
    n = min(max(lengths[b], 0), L)  # (a device lengths is not checked on the host)
    nt = cuda.blockDim.x
    buf = cuda.shared.array(_THREADS, float32)
    m = -math.inf
    for j in range(tid, n, nt):
        m = max(m, scores[b, j])
    m = block_max(buf, tid, m)
    s = float32(0.0)
    for j in range(tid, n, nt):
        s += math.exp(scores[b, j] - m)
    total = block_sum(buf, tid, s)
    inv = float32(1.0) / total if n > 0 else float32(0.0)
    for j in range(tid, L, nt):
        weights[b, j] = math.exp(scores[b, j] - m) * inv if j < n else float32(0.0)
    cuda.syncthreads()
    for d in range(tid, Dk, nt):
        acc = float32(0.0)
        for j in range(n):
            acc += weights[b, j] * keys[b, j, d]
        context[b, d] = acc


def additive_attention(query, keys_proj, keys, w_q, v, *, lengths=None):
    """See :func:`seqjit.kernels.additive_attention.reference.additive_attention`. ``lengths`` may be a
    device array (a decode loop's, which never leaves the GPU): its shape and dtype are checked on the
    host, its values clipped to ``[0, L]`` on the device."""
    device_lengths = lengths is not None and _cuda.is_device_array(lengths)
    p = spec.prepare(query, keys_proj, keys, w_q, v, None if device_lengths else lengths, device=True)
    if device_lengths:
        if len(lengths.shape) != 1 or lengths.shape[0] != p.query.shape[0] or np.dtype(lengths.dtype).kind not in "iu":
            raise ValueError(f"lengths must be an integer array of shape [{p.query.shape[0]}], got "
                             f"{lengths.dtype} {list(lengths.shape)}")
    for name in ("query", "keys_proj", "keys", "w_q", "v"):
        _cuda.require_float32(name, getattr(p, name))
    on_device = _cuda.any_on_device(p.query, p.keys_proj, p.keys, p.w_q, p.v)
    B, L, A = p.keys_proj.shape
    Dk = p.keys.shape[2]
    context = _cuda.device_empty((B, Dk), np.float32)
    weights = _cuda.device_empty((B, L), np.float32)
    if B:
        qp = _cuda.scratch("additive.qp", (B, A), np.float32)
        scores = _cuda.scratch("additive.scores", (B, L), np.float32)
        dq, dkp, dk = _cuda.to_device(p.query), _cuda.to_device(p.keys_proj), _cuda.to_device(p.keys)
        dlen = lengths if device_lengths else _cuda.to_device(p.lengths)
        if A:
            _project[_cuda.grid_1d(B * A, _THREADS)](dq, _cuda.to_device(p.w_q), qp)
        if L:
            _scores[_cuda.grid_1d(B * L, _THREADS)](qp, dkp, _cuda.to_device(p.v), dlen, scores)
        _softmax_context[B, _cuda.row_threads(max(L, Dk), _THREADS)](scores, dk, dlen, weights, context)
    if on_device:
        return context, weights
    return context.copy_to_host(), weights.copy_to_host()
