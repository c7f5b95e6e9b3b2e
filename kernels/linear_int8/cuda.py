"""numba.cuda linear_int8: the reference's arithmetic (see :mod:`.reference`) on the GPU.

One thread per row quantizes x (rint done in float64, where it is exact: the float32 products are
within [-127.5, 127.5]); one thread per output element computes an int32 dot product and the
dequantize + bias + activation epilogue. Written for correctness (it is tested on the CUDA
simulator); the CPU backends are the fast ones. Host arrays in -> host array out; a device array in
-> device array out (see seqjit.kernels._cuda).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, float64, int32

from seqjit.kernels import _cuda
from seqjit.kernels.activations.cuda import activate

from . import spec

_DUMMY = np.zeros(1, np.float32)


@cuda.jit(device=True, inline=True)
def _rint(v):
    """Round half to even (as numpy.rint), exactly, for a float32 value."""
    d = float64(v)
    r = math.floor(d)
    f = d - r
    if f > 0.5 or (f == 0.5 and r - 2.0 * math.floor(r * 0.5) == 1.0):
        r += 1.0
    return r


@cuda.jit(cache=False)
def _quantize_rows(x, q, scale):
    r = cuda.grid(1)
    m, k = x.shape
    if r < m:
        amax = float32(0.0)
        for i in range(k):
            a = abs(x[r, i])
            if a > amax:
                amax = a
        inv = float32(127.0) / amax if amax > float32(0.0) else float32(0.0)
        for i in range(k):
            v = _rint(float32(x[r, i] * inv))
            q[r, i] = min(max(v, -127.0), 127.0)
        scale[r] = float32(amax / float32(127.0))


@cuda.jit(device=True, inline=True)
def _dot(qx, r, qw, j):
    s = int32(0)
    for i in range(qx.shape[1]):
        s += int32(qx[r, i]) * int32(qw[j, i])
    return s


@cuda.jit(cache=False)
def _matmul(qx, qw, out):
    i = cuda.grid(1)
    m, n = out.shape
    if i < m * n:
        out[i // n, i % n] = _dot(qx, i // n, qw, i % n)


@cuda.jit(cache=False)
def _linear(qx, xs, qw, ws, bias, has_bias, code, out):
    i = cuda.grid(1)
    m, n = out.shape
    if i < m * n:
        r = i // n
        j = i % n
        s = float32(xs[r] * ws[j])
        y = float64(float32(_dot(qx, r, qw, j))) * float64(s)
        if has_bias:
            y += float64(bias[j])
        out[r, j] = activate(float32(y), code)


def quantize_int8(x):
    """See :func:`seqjit.kernels.linear_int8.reference.quantize_int8`."""
    on_device = _cuda.any_on_device(x)
    x2, shape = spec.prepare_quantize(x, device=True)
    m, k = x2.shape
    q = _cuda.device_empty((m, k), np.int8)
    scale = _cuda.device_empty((m,), np.float32)
    if m:
        _quantize_rows[_cuda.grid_1d(m, 64)](_cuda.to_device(x2), q, scale)
    q, scale = q.reshape(shape), scale.reshape(shape[:-1])
    return (q, scale) if on_device else (q.copy_to_host(), scale.copy_to_host())


def matmul_int8(qx, qw):
    """See :func:`seqjit.kernels.linear_int8.reference.matmul_int8`."""
    on_device = _cuda.any_on_device(qx, qw)
    qx, qw, shape = spec.prepare_matmul(qx, qw, device=True)
    out = _cuda.device_empty(shape, np.int32)
    if shape[0] * shape[1]:
        _matmul[_cuda.grid_1d(shape[0] * shape[1])](_cuda.to_device(qx), _cuda.to_device(qw), out)
    return out if on_device else out.copy_to_host()


def linear_int8(x, weight, scale, bias=None, *, activation=None, out=None):
    """See :func:`seqjit.kernels.linear_int8.reference.linear_int8`."""
    on_device = _cuda.any_on_device(x, weight, scale, bias, out)
    x2, w, ws, b, code, _, shape = spec.prepare_linear(x, weight, scale, bias, activation, out, device=True)
    m, k = x2.shape
    n = shape[-1]
    dout = _cuda.device_out("out", out, shape, np.float32)
    if m and n:
        qx = _cuda.device_empty((m, k), np.int8)
        xs = _cuda.device_empty((m,), np.float32)
        _quantize_rows[_cuda.grid_1d(m, 64)](_cuda.to_device(x2), qx, xs)
        db = _cuda.to_device(b if b is not None else _DUMMY)
        _linear[_cuda.grid_1d(m * n)](qx, xs, _cuda.to_device(w), _cuda.to_device(ws), db, b is not None, code,
                                      dout.reshape(m, n))
    return _cuda.finish(dout, out, on_device)
