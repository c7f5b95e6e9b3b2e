"""Numba CPU linear: ``np.dot`` inside Numba (a BLAS GEMM/GEMV: Numba binds scipy's BLAS, the same
library and thread pool as the Cython kernels) into the output, then the bias + activation epilogue,
a vectorised loop over the rows just written while they are still in cache.

Large inputs go through in row blocks of about :data:`BLOCK_BYTES` of output: one GEMM per block
(BLAS threads it), then the epilogue on that block. The epilogue runs on the calling thread: it is a
few percent of the GEMM, and handing over between BLAS's thread pool and Numba's after every block
made the whole op several times slower on a busy 2-core machine (each pool's idle threads spin
while the other's need the cores).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from seqjit.kernels.activations.numba_cpu import FASTMATH, activate

from . import spec

#: output bytes per row block: small enough to stay in cache between the GEMM and its epilogue,
#: large enough for BLAS to run at full speed
BLOCK_BYTES = 1 << 21


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _gemm_block(x, wt, bias, code, epilogue, out):
    """``out = activation(x @ wt + bias)``: x ``[m, K]``, wt ``[K, N]`` (C or F order), out ``[m, N]``."""
    np.dot(x, wt, out)
    if epilogue:
        for r in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[r, j] = activate(out[r, j] + bias[j], code)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _gemv(x, wt, bias, code, epilogue, out):
    """One row: ``out = activation(x @ wt + bias)``, x ``[K]``, out ``[N]``."""
    np.dot(x, wt, out)
    if epilogue:
        for j in range(out.shape[0]):
            out[j] = activate(out[j] + bias[j], code)


@lru_cache(maxsize=16)
def _zeros_cached(n: int, dtype: str) -> np.ndarray:
    z = np.zeros(n, dtype=dtype)
    z.flags.writeable = False
    return z


def linear(x, weight, bias=None, *, activation=None, weight_layout="out_in", out=None):
    x2, w, b, code, out_in, o2, result = spec.prepare(x, weight, bias, activation, weight_layout, out)
    m, n = o2.shape
    if m == 0 or n == 0:
        return result
    wt = w.T if out_in else w  # [K, N]: a Fortran-order view of "out_in" weights, no copy
    epilogue = b is not None or code != 0
    bias = b if b is not None else _zeros_cached(n, o2.dtype.str)
    if x2.shape[1] == 0:  # K = 0: BLAS is not called with an empty inner dimension
        o2[...] = 0
        if epilogue:
            _gemm_block(np.zeros((m, 1), x2.dtype), np.zeros((1, n), x2.dtype), bias, code, True, o2)
        return result
    if m == 1:
        _gemv(x2[0], wt, bias, code, epilogue, o2[0])
        return result
    block = max(8, BLOCK_BYTES // (n * o2.itemsize))
    for r0 in range(0, m, block):
        _gemm_block(x2[r0 : r0 + block], wt, bias, code, epilogue, o2[r0 : r0 + block])
    return result
