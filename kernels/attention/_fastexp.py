"""``exp2`` for Numba kernels: a float32 polynomial that LLVM vectorises, float64 via libm.

Numba has no vector math library here (no SVML), so ``np.exp`` in a loop runs one scalar libm call
per element; attention spends a large share of its time there. For float32, ``exp2(x)`` is computed as
``2**n * p(f)`` with ``n = round(x)``, ``f = x - n`` in ``[-0.5, 0.5]`` and Cephes' degree-6 polynomial
``p`` (relative error below 1 ulp), ``2**n`` built from the exponent bits: only arithmetic, floor and a
bit cast, which vectorise. Valid for ``x <= 0`` (attention's use: ``x = s - max``); below -125 the
result is clamped to ``2**-125`` (~2e-38), i.e. zero to float32 accuracy after the weighted sum.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

_P0, _P1, _P2 = np.float32(1.535336188319500e-4), np.float32(1.339887440266574e-3), np.float32(9.618437357674640e-3)
_P3, _P4, _P5 = np.float32(5.550332471162809e-2), np.float32(2.402264791363012e-1), np.float32(6.931472028550421e-1)


@intrinsic
def _pow2_float32(typingctx, n):
    """``2 ** n`` for a float32 holding an integer in [-126, 127]: the exponent bits ``(n + 127) << 23``
    bit-cast to float32 (all in 32-bit lanes, so LLVM vectorises it)."""
    if n != types.float32:
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        bits = builder.shl(builder.add(builder.fptosi(args[0], i32), ir.Constant(i32, 127)), ir.Constant(i32, 23))
        return builder.bitcast(bits, ir.FloatType())

    return types.float32(types.float32), codegen


def exp2_nonpos(x):
    """``2 ** x`` for ``x <= 0`` (pure-Python stand-in; Numba uses the overload below)."""
    return np.exp2(x)


@overload(exp2_nonpos, jit_options={"fastmath": {"contract"}})
def _exp2_nonpos_impl(x):
    if x == types.float32:

        def impl(x):
            x = max(x, np.float32(-125.0))
            n = np.floor(x + np.float32(0.5))
            f = x - n
            p = ((((_P0 * f + _P1) * f + _P2) * f + _P3) * f + _P4) * f + _P5
            p = p * f + np.float32(1.0)
            return p * _pow2_float32(n)

        return impl
    if isinstance(x, types.Float):
        return lambda x: np.exp2(x)
    return None


@njit(cache=True)
def _check(x):
    return exp2_nonpos(x)
