"""numba.cuda activations: one thread per element (grid-stride loop).

:func:`activate` is a device function, also fused into the GEMM epilogue of
:mod:`seqjit.kernels.linear`'s cuda backend. Host arrays in -> host array out; a device array in ->
device array out (see seqjit.kernels._cuda).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from seqjit.kernels import _cuda

from . import spec

_RELU, _GELU, _GELU_TANH, _SILU, _TANH = spec.RELU, spec.GELU, spec.GELU_TANH, spec.SILU, spec.TANH
F = np.float32
_HALF, _ONE, _ZERO = F(0.5), F(1.0), F(0.0)
_SQRT_HALF, _SQRT_2PI, _C = F(spec.SQRT_HALF), F(spec.SQRT_2_OVER_PI), F(0.044715)
_EXP_CAP = F(80.0)


@cuda.jit(device=True, inline=True)
def activate(v, code):
    """Activation ``code`` (spec.ACTIVATIONS) of the float32 ``v``."""
    if code == _RELU:
        return _ZERO if v < _ZERO else v
    if code == _GELU:
        return _HALF * v * (_ONE + math.erf(v * _SQRT_HALF))
    if code == _GELU_TANH:
        return _HALF * v * (_ONE + math.tanh(_SQRT_2PI * (v + _C * v * v * v)))
    if code == _SILU:
        return v / (_ONE + math.exp(min(-v, _EXP_CAP)))  # capped: no float32 overflow
    if code == _TANH:
        return math.tanh(v)
    return v


@cuda.jit(cache=False)
def _apply(x, out, code):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = activate(x[i], code)


def _run(x, out, code):
    on_device = _cuda.any_on_device(x, out)
    x1, _, shape = spec.prepare(x, out, device=True)
    _cuda.require_float32("x", x1)
    dout = _cuda.device_out("out", out, shape, x1.dtype)
    n = x1.shape[0]
    if n:
        blocks, threads = _cuda.grid_1d(n)
        _apply[min(blocks, 4096), threads](_cuda.to_device(x1), dout.reshape(n), code)
    return _cuda.finish(dout, out, on_device)


def relu(x, *, out=None):
    return _run(x, out, spec.RELU)


def gelu(x, *, approximate="none", out=None):
    return _run(x, out, spec.gelu_code(approximate))


def silu(x, *, out=None):
    return _run(x, out, spec.SILU)


def tanh(x, *, out=None):
    return _run(x, out, spec.TANH)
