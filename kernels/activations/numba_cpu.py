"""Numba CPU activations: one vectorised loop, split over threads for large arrays.

:func:`activate` (a scalar, inlined into loops) is also what :mod:`seqjit.kernels.linear` fuses
into its GEMM epilogue. float32 uses the vectorisable polynomials of :mod:`seqjit.kernels._vecmath`;
float64 uses libm.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from seqjit.kernels import _vecmath as vm

from . import spec

#: compile options for loops calling :func:`activate`: the numpy error model keeps divisions free of
#: zero checks (which would stop vectorisation); no reassociation, so results match the reference.
FASTMATH = {"contract", "arcp", "nsz"}
#: arrays smaller than this run on one thread (a parallel launch costs more than it saves)
PARALLEL_MIN = 1 << 16

_RELU, _GELU, _GELU_TANH, _SILU, _TANH = spec.RELU, spec.GELU, spec.GELU_TANH, spec.SILU, spec.TANH

F = np.float32
_H32, _O32, _Z32 = F(0.5), F(1.0), F(0.0)
_SQRT_HALF32, _SQRT_2PI32, _C32 = F(spec.SQRT_HALF), F(spec.SQRT_2_OVER_PI), F(0.044715)
_SQRT_HALF, _SQRT_2PI = spec.SQRT_HALF, spec.SQRT_2_OVER_PI


@njit(inline="always", fastmath=FASTMATH, error_model="numpy")
def _activate32(v, code):
    if code == _RELU:
        return _Z32 if v < _Z32 else v
    if code == _GELU:
        return _H32 * v * (_O32 + vm.erf_f32(v * _SQRT_HALF32))
    if code == _GELU_TANH:
        return _H32 * v * (_O32 + vm.tanh_f32(_SQRT_2PI32 * (v + _C32 * v * v * v)))
    if code == _SILU:
        return v * vm.sigmoid_f32(v)
    if code == _TANH:
        return vm.tanh_f32(v)
    return v


@njit(inline="always", fastmath=FASTMATH, error_model="numpy")
def _activate64(v, code):
    if code == _RELU:
        return 0.0 if v < 0.0 else v
    if code == _GELU:
        return 0.5 * v * (1.0 + vm.verf(v * _SQRT_HALF))
    if code == _GELU_TANH:
        return 0.5 * v * (1.0 + vm.vtanh(_SQRT_2PI * (v + 0.044715 * v * v * v)))
    if code == _SILU:
        return v * vm.vsigmoid(v)
    if code == _TANH:
        return vm.vtanh(v)
    return v


def activate(v, code):
    """Activation ``code`` (spec.ACTIVATIONS) of the scalar ``v``, in ``v``'s precision."""
    raise NotImplementedError("activate is only callable from Numba-compiled code")


@overload(activate, inline="always")
def _activate_overload(v, code):
    if v == types.float32:
        return _activate32.py_func
    if isinstance(v, types.Float):
        return _activate64.py_func
    return None


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _apply_serial(x, out, code):
    for i in range(x.shape[0]):
        out[i] = activate(x[i], code)


@njit(cache=True, parallel=True, fastmath=FASTMATH, error_model="numpy")
def _apply_parallel(x, out, code):
    for i in prange(x.shape[0]):
        out[i] = activate(x[i], code)


def _run(x, out, code):
    x1, o1, result = spec.prepare(x, out)
    if x1.shape[0] >= PARALLEL_MIN:
        _apply_parallel(x1, o1, code)
    elif x1.shape[0]:
        _apply_serial(x1, o1, code)
    return result


def relu(x, *, out=None):
    return _run(x, out, spec.RELU)


def gelu(x, *, approximate="none", out=None):
    return _run(x, out, spec.gelu_code(approximate))


def silu(x, *, out=None):
    return _run(x, out, spec.SILU)


def tanh(x, *, out=None):
    return _run(x, out, spec.TANH)
