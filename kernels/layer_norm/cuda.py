"""numba.cuda layer_norm: one thread block per row (``row_threads(d, 128)``: 8 or more columns a
thread); mean and
variance by shared-memory tree reductions (two passes: the variance is taken about the mean, as in
the reference).

Host arrays in -> host array out; a device array in -> device array out (see seqjit.kernels._cuda).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as _layout
from seqjit.kernels._cuda_reduce import block_sum as _block_sum

from . import spec

_THREADS = 128
_dummy = None  # a device [1] array standing in for an absent weight or bias (made once)


@cuda.jit(cache=False)
def _layer_norm_rows(x, weight, bias, has_weight, has_bias, eps, out):
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    d = x.shape[1]
    buf = cuda.shared.array(_THREADS, float32)
    s = float32(0.0)
    for j in range(tid, d, cuda.blockDim.x):
        s += x[r, j]
    mean = _block_sum(buf, tid, s) / float32(d)
    s = float32(0.0)
    for j in range(tid, d, cuda.blockDim.x):
        t = x[r, j] - mean
        s += t * t
    rstd = float32(1.0) / math.sqrt(_block_sum(buf, tid, s) / float32(d) + eps)
    for j in range(tid, d, cuda.blockDim.x):
        y = (x[r, j] - mean) * rstd
        if has_weight:
            y = y * weight[j]
        if has_bias:
            y = y + bias[j]
        out[r, j] = y


def layer_norm(x, weight=None, bias=None, *, eps=1e-5, out=None):
    on_device = _cuda.any_on_device(x, weight, bias, out)
    x2, w, b, eps, _, shape = spec.prepare(x, weight, bias, eps, out, device=True)
    _cuda.require_float32("x", x2)
    rows, d = x2.shape
    dout = _cuda.device_out("out", out, shape, x2.dtype)
    if rows and d:
        global _dummy
        if (w is None or b is None) and _dummy is None:
            _dummy = _layout.zeros((1,), np.float32)
        dw = _cuda.to_device(w) if w is not None else _dummy
        db = _cuda.to_device(b) if b is not None else _dummy
        _layer_norm_rows[rows, _cuda.row_threads(d, _THREADS)](
            _cuda.to_device(x2), dw, db, w is not None, b is not None, np.float32(eps), dout.reshape(rows, d)
        )
    return _cuda.finish(dout, out, on_device)
