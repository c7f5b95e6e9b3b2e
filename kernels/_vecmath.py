"""Vectorisable float32 exp / erf / tanh / sigmoid for Numba kernels.

LLVM cannot vectorise a loop that calls libm's ``expf`` (Numba has no vector math library here),
so a loop over ``math.exp`` runs one element at a time. These scalar functions use only arithmetic,
``floor``, compares and an int->float bit cast, so a loop calling them vectorises (AVX2/AVX-512).

Accuracy (float32, checked in tests/kernels/test_activations.py against float64 libm):

- ``exp_f32``: Cephes ``expf`` polynomial, about 2 ulp; 0 below -87.34 (no denormals), inf above
  88.37;
- ``tanh_f32``: Cephes ``tanhf`` (odd polynomial for ``|x| < 0.625``), about 2 ulp;
- ``erf_f32``: Cephes ``erff`` odd polynomial for ``|x| < 1`` (about 1 ulp), Abramowitz & Stegun
  7.1.26 above (absolute error below 1.5e-7, what PyTorch's vectorised CPU erf uses everywhere);
- ``sigmoid_f32``: ``1 / (1 + exp(-x))``;
- ``fmax``: LLVM ``maxnum`` (any float type), for max reductions that vectorise.

Every constant is a ``np.float32`` global so Numba keeps the arithmetic in float32. The functions are
inlined into the calling loop at the Numba IR level (LLVM does not inline Numba-to-Numba calls far
enough to vectorise), and the calling kernel must be compiled with ``error_model="numpy"``: under
Numba's default (Python) error model every division checks for a zero divisor, and that branch stops
the loop from vectorising. They hold no Python-level branches (selects are arithmetic blends or
``copysign``): Numba's inliner mishandles the phi nodes of inlined conditionals in some call sites.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

F = np.float32
#: no reassociation (results stay those of the written formula); no zero-division checks
_FASTMATH = {"contract", "arcp", "nsz"}

_LOG2E = F(1.44269504088896341)
_LN2_HI = F(0.693359375)
_LN2_LO = F(-2.12194440e-4)
_EXP_LO = F(-87.3365447504)
_EXP_OVER = F(88.7228391117)
_INF = F(np.inf)
_HALF = F(0.5)
_ONE = F(1.0)
_TWO = F(2.0)
_ZERO = F(0.0)
_P0, _P1, _P2 = F(1.9875691500e-4), F(1.3981999507e-3), F(8.3334519073e-3)
_P3, _P4, _P5 = F(4.1665795894e-2), F(1.6666665459e-1), F(5.0000001201e-1)

_T0, _T1, _T2 = F(-5.70498872745e-3), F(2.06390887954e-2), F(-5.37397155531e-2)
_T3, _T4 = F(1.33314422036e-1), F(-3.33332819422e-1)
_TANH_SMALL = F(0.625)

_E0, _E1, _E2 = F(7.853861353153693e-5), F(-8.010193625184903e-4), F(5.188327685732524e-3)
_E3, _E4, _E5 = F(-2.685381193529856e-2), F(1.128358514861418e-1), F(-3.761262582423300e-1)
_E6 = F(1.128379165726710)
_ERF_P = F(0.3275911)
_A1, _A2, _A3 = F(0.254829592), F(-0.284496736), F(1.421413741)
_A4, _A5 = F(-1.453152027), F(1.061405429)


@intrinsic
def _bits_to_f32(typingctx, bits):
    """Reinterpret the bits of an int32 as a float32 (an LLVM bitcast: free and vectorisable)."""
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@intrinsic
def fmax(typingctx, a, b):
    """max(a, b) for two floats of one type, as LLVM's ``maxnum`` (a NaN operand is ignored).

    A loop reducing with it vectorises; Numba's ``max``/``np.maximum`` keep NaN checks that stop
    the vectoriser.
    """
    if not (isinstance(a, types.Float) and a == b):
        return None

    def codegen(context, builder, signature, args):
        ty = args[0].type
        fn = builder.module.declare_intrinsic("llvm.maxnum", [ty], ir.FunctionType(ty, [ty, ty]))
        return builder.call(fn, args)

    return a(a, b), codegen


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def exp_f32(x):
    """e**x for a float32 ``x``: 0 below -87.34 (where the result would be denormal), inf above
    88.37 (a little early: the true overflow is at 88.72)."""
    xc = min(max(x, _EXP_LO), _EXP_OVER)
    n = np.floor(xc * _LOG2E + _HALF)
    f = xc - n * _LN2_HI - n * _LN2_LO
    z = f * f
    p = (((((_P0 * f + _P1) * f + _P2) * f + _P3) * f + _P4) * f + _P5) * z + f + _ONE
    scale = _bits_to_f32(np.int32((np.int32(n) + np.int32(127)) << np.int32(23)))
    return p * scale * F(x >= _EXP_LO)


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def tanh_f32(x):
    """tanh of a float32 ``x``."""
    a = abs(x)
    e = exp_f32(-_TWO * a)
    big = (_ONE - e) / (_ONE + e)
    s = min(a, _TANH_SMALL)
    z = s * s
    small = ((((_T0 * z + _T1) * z + _T2) * z + _T3) * z + _T4) * z * s + s
    w = F(a < _TANH_SMALL)
    return np.copysign(w * small + (_ONE - w) * big, x)


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def erf_f32(x):
    """erf of a float32 ``x`` (absolute error < 1.5e-7; relative about 1 ulp for ``|x| < 1``)."""
    a = abs(x)
    s = min(a, _ONE)
    zs = s * s
    small = ((((((_E0 * zs + _E1) * zs + _E2) * zs + _E3) * zs + _E4) * zs + _E5) * zs + _E6) * s
    t = _ONE / (_ONE + _ERF_P * a)
    poly = ((((_A5 * t + _A4) * t + _A3) * t + _A2) * t + _A1) * t
    big = _ONE - poly * exp_f32(-a * a)
    w = F(a < _ONE)
    return np.copysign(w * small + (_ONE - w) * big, x)


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def sigmoid_f32(x):
    """1 / (1 + e**-x) for a float32 ``x``."""
    return _ONE / (_ONE + exp_f32(-x))


# Dtype-generic versions for kernels that take float32 or float64: the float32 fast path above, or
# libm for float64 (the validation dtype), chosen at compile time.
def vexp(x):
    """e**x: ``exp_f32`` for float32, ``math.exp`` otherwise."""


def verf(x):
    """erf(x): ``erf_f32`` for float32, ``math.erf`` otherwise."""


def vtanh(x):
    """tanh(x): ``tanh_f32`` for float32, ``math.tanh`` otherwise."""


def vsigmoid(x):
    """1 / (1 + e**-x): ``sigmoid_f32`` for float32, libm ``exp`` otherwise."""


def _generic(fast, slow):
    def typer(x):
        if x == types.float32:
            return fast.py_func
        if isinstance(x, types.Float):
            return slow
        return None

    return typer


def _exp_libm(x):
    return math.exp(x)


def _erf_libm(x):
    return math.erf(x)


def _tanh_libm(x):
    return math.tanh(x)


def _sigmoid_libm(x):
    return 1.0 / (1.0 + math.exp(-x))


overload(vexp, inline="always")(_generic(exp_f32, _exp_libm))
overload(verf, inline="always")(_generic(erf_f32, _erf_libm))
overload(vtanh, inline="always")(_generic(tanh_f32, _tanh_libm))
overload(vsigmoid, inline="always")(_generic(sigmoid_f32, _sigmoid_libm))
