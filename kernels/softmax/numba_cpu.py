"""Numba CPU softmax / log_softmax: rows in parallel, three vectorised passes per row (max, sum of
exponentials, write).

float32 rows use the vectorisable ``exp`` of :mod:`seqjit.kernels._vecmath` (libm's ``expf`` cannot
be vectorised here); float64 rows use libm. Small inputs run on one thread: a parallel launch costs
more than it saves.

Non-finite rows (:mod:`spec`): the max pass also takes the largest ``|x|`` bit pattern, an integer
reduction that the fast-math flags cannot drop (they let the compiler assume no NaN, and the float
max ignores NaN). Only a NaN has a pattern above that of inf, so one compare after the pass finds
it; rows with a kept NaN, a +inf or only -inf leave the normal path there. Cost on finite input
(the row loop alone, rows in cache): about 0-5%.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from seqjit.kernels._vecmath import fmax, vexp

from . import spec

_EMPTY_MASK = np.ones((0, 0), dtype=np.uint8)
#: max and sum reductions may be reordered (vectorised); NaN is found by integer compares (above)
_FASTMATH = {"nnan", "reassoc", "contract", "arcp", "nsz"}
_PARALLEL_MIN = 1 << 15
_INT_OF = {types.float32: types.int32, types.float64: types.int64}


@intrinsic
def _abs_bits(typingctx, x):
    """The bits of a float with the sign bit cleared, as a signed integer of the same width (an
    LLVM bitcast and an and: vectorisable, and untouched by fast-math flags)."""
    if x not in _INT_OF:
        return None
    int_type = _INT_OF[x]

    def codegen(context, builder, signature, args):
        width = int_type.bitwidth
        bits = builder.bitcast(args[0], ir.IntType(width))
        return builder.and_(bits, ir.Constant(ir.IntType(width), (1 << (width - 1)) - 1))

    return int_type(x), codegen


@njit(cache=True, fastmath=_FASTMATH, error_model="numpy")
def _fill(out, r, value):
    for j in range(out.shape[1]):
        out[r, j] = value


@njit(cache=True, fastmath=_FASTMATH, error_model="numpy")
def _row(x, mask, has_mask, out, log, r):
    n = x.shape[1]
    real = x.dtype.type  # keep float32 rows in float32 (a float64 scalar would widen every lane)
    ninf = real(-np.inf)
    inf_bits = _abs_bits(real(np.inf))
    m = ninf
    top = _abs_bits(real(0))  # the largest |x| bit pattern (same int width: no widening per element)
    if has_mask:
        for j in range(n):
            v = x[r, j] if mask[r, j] else ninf
            m = fmax(m, v)  # maxnum: ignores NaN
            top = max(top, _abs_bits(v))  # a removed element is -inf here: never above inf
    else:
        for j in range(n):
            m = fmax(m, x[r, j])
            top = max(top, _abs_bits(x[r, j]))
    if top > inf_bits or m == np.inf:  # a kept NaN or +inf: the row is NaN
        _fill(out, r, np.nan)
        return
    if m == -np.inf:  # nothing kept above -inf: zeros / -inf, never NaN
        _fill(out, r, -np.inf if log else 0)
        return
    total = real(0)
    if log:
        if has_mask:
            for j in range(n):
                e = vexp(x[r, j] - m)  # computed unconditionally: a select, not a branch
                total += e if mask[r, j] else 0
        else:
            for j in range(n):
                total += vexp(x[r, j] - m)
        lse = m + np.log(total)
        for j in range(n):
            out[r, j] = x[r, j] - lse if (not has_mask or mask[r, j]) else ninf
    else:
        if has_mask:
            for j in range(n):
                e = vexp(x[r, j] - m)
                e = e if mask[r, j] else 0
                out[r, j] = e
                total += e
        else:
            for j in range(n):
                e = vexp(x[r, j] - m)
                out[r, j] = e
                total += e
        inv = real(1) / total
        for j in range(n):
            out[r, j] *= inv


@njit(cache=True, fastmath=_FASTMATH, error_model="numpy")
def _rows_serial(x, mask, has_mask, out, log):
    for r in range(x.shape[0]):
        _row(x, mask, has_mask, out, log, r)


@njit(cache=True, parallel=True, fastmath=_FASTMATH, error_model="numpy")
def _rows_parallel(x, mask, has_mask, out, log):
    for r in prange(x.shape[0]):
        _row(x, mask, has_mask, out, log, r)


def _run(x, mask, out, log):
    x2, m2, o2, result = spec.prepare(x, mask, out)
    if x2.size == 0:
        return result
    mask2 = _EMPTY_MASK if m2 is None else m2
    if x2.size >= _PARALLEL_MIN and x2.shape[0] > 1:
        _rows_parallel(x2, mask2, m2 is not None, o2, log)
    else:
        _rows_serial(x2, mask2, m2 is not None, o2, log)
    return result


def softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, False)


def log_softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, True)
