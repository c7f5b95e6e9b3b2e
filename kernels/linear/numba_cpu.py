"""Numba CPU linear: BLAS GEMM (numpy's) into the output, then the bias + activation epilogue, a
vectorised Numba loop over the block just written while it is still in cache.

Large inputs go through in row blocks of about :data:`BLOCK_BYTES` of output: one GEMM per block
(BLAS threads it), then the epilogue on that block. For ``M == 1`` the GEMM is a GEMV. The epilogue
runs on the calling thread: it is a few percent of the GEMM, and handing over between BLAS's thread
pool and Numba's after every block made the whole op several times slower on a busy 2-core machine
(each pool's idle threads spin while the other's need the cores).
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
def _epilogue_serial(y, bias, code):
    for r in range(y.shape[0]):
        for j in range(y.shape[1]):
            y[r, j] = activate(y[r, j] + bias[j], code)


def _epilogue(y, bias, code):
    """``y = activation(y + bias)`` in place; a missing bias is a zero vector (one cached row)."""
    if bias is None:
        if code == 0:
            return
        bias = _zeros(y.shape[1], y.dtype)
    _epilogue_serial(y, bias, code)


@lru_cache(maxsize=16)
def _zeros_cached(n: int, dtype: str) -> np.ndarray:
    z = np.zeros(n, dtype=dtype)
    z.flags.writeable = False
    return z


def _zeros(n, dtype):
    return _zeros_cached(int(n), np.dtype(dtype).str)


def linear(x, weight, bias=None, *, activation=None, weight_layout="out_in", out=None):
    x2, w, b, code, out_in, o2, result = spec.prepare(x, weight, bias, activation, weight_layout, out)
    m, n = o2.shape
    if m == 0 or n == 0:
        return result
    wt = w.T if out_in else w  # [K, N] view
    if m == 1:
        np.dot(wt.T, x2[0], out=o2[0]) if out_in else np.dot(x2[0], wt, out=o2[0])
        _epilogue(o2, b, code)
        return result
    block = max(8, BLOCK_BYTES // (n * o2.itemsize))
    for r0 in range(0, m, block):
        r1 = min(m, r0 + block)
        np.matmul(x2[r0:r1], wt, out=o2[r0:r1])
        _epilogue(o2[r0:r1], b, code)
    return result
