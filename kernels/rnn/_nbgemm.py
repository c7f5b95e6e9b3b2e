"""A register-blocked ``out = h @ w.T`` building block for Numba kernels (no BLAS).

:func:`dot_rows` computes a block of rows of ``w`` against a block of rows of ``h``, 4 weight rows x 4
state rows per pass (16 accumulators; each weight element is loaded once per 4 state rows, each
state element once per 4 weight rows), with ``reassoc`` fastmath so LLVM vectorises the dot products.
Callers parallelise over blocks of weight rows themselves, in the same Numba thread pool as the
rest of their work: mixing an OpenBLAS thread pool with Numba's OpenMP pool makes the two fight over
the cores of a small machine.
"""
from __future__ import annotations

from numba import njit

FASTMATH = {"reassoc", "contract", "nsz"}


@njit(fastmath=FASTMATH, cache=True)
def _rows4(w, r, h, h0, nh, out, o0, c):
    """``out[o0 + i, c + q] = w[r + q] . h[h0 + i]`` for q < 4 and i < nh."""
    K = w.shape[1]
    zero = out.dtype.type(0)
    i = 0
    while i + 4 <= nh:
        p, o = h0 + i, o0 + i
        a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = zero
        a20 = a21 = a22 = a23 = a30 = a31 = a32 = a33 = zero
        for k in range(K):
            w0, w1, w2, w3 = w[r, k], w[r + 1, k], w[r + 2, k], w[r + 3, k]
            x0, x1, x2, x3 = h[p, k], h[p + 1, k], h[p + 2, k], h[p + 3, k]
            a00 += w0 * x0
            a01 += w0 * x1
            a02 += w0 * x2
            a03 += w0 * x3
            a10 += w1 * x0
            a11 += w1 * x1
            a12 += w1 * x2
            a13 += w1 * x3
            a20 += w2 * x0
            a21 += w2 * x1
            a22 += w2 * x2
            a23 += w2 * x3
            a30 += w3 * x0
            a31 += w3 * x1
            a32 += w3 * x2
            a33 += w3 * x3
        out[o, c], out[o, c + 1], out[o, c + 2], out[o, c + 3] = a00, a10, a20, a30
        out[o + 1, c], out[o + 1, c + 1], out[o + 1, c + 2], out[o + 1, c + 3] = a01, a11, a21, a31
        out[o + 2, c], out[o + 2, c + 1], out[o + 2, c + 2], out[o + 2, c + 3] = a02, a12, a22, a32
        out[o + 3, c], out[o + 3, c + 1], out[o + 3, c + 2], out[o + 3, c + 3] = a03, a13, a23, a33
        i += 4
    while i < nh:
        p = h0 + i
        a0 = a1 = a2 = a3 = zero
        for k in range(K):
            x = h[p, k]
            a0 += w[r, k] * x
            a1 += w[r + 1, k] * x
            a2 += w[r + 2, k] * x
            a3 += w[r + 3, k] * x
        o = o0 + i
        out[o, c], out[o, c + 1], out[o, c + 2], out[o, c + 3] = a0, a1, a2, a3
        i += 1


@njit(fastmath=FASTMATH, cache=True)
def _row1(w, r, h, h0, nh, out, o0, c):
    """``out[o0 + i, c] = w[r] . h[h0 + i]`` for i < nh."""
    for i in range(nh):
        a = out.dtype.type(0)
        for k in range(w.shape[1]):
            a += w[r, k] * h[h0 + i, k]
        out[o0 + i, c] = a


@njit(fastmath=FASTMATH, cache=True)
def dot_rows(w, r0, r1, h, h0, nh, out, o0, c0):
    """``out[o0 + i, c0 + (r - r0)] = w[r] . h[h0 + i]`` for r0 <= r < r1 and i < nh.

    ``w`` ``[N, K]``, ``h`` ``[M, K]``, ``out`` ``[M', N']``, all C-contiguous; the caller guarantees
    the index ranges (no bounds checks).
    """
    r = r0
    while r + 4 <= r1:
        _rows4(w, r, h, h0, nh, out, o0, c0 + r - r0)
        r += 4
    while r < r1:
        _row1(w, r, h, h0, nh, out, o0, c0 + r - r0)
        r += 1
