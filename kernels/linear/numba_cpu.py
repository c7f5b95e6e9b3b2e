"""Numba CPU linear: BLAS GEMM/GEMV (scipy's BLAS, called by address from Numba: the same library
and thread pool as the Cython kernels) written straight into the output, then the bias + activation
epilogue, a vectorised loop over the block just written while it is still in cache.

Calling BLAS directly (rather than ``np.dot``) lets a GEMM write any column range of the output in
place (the leading dimension is the full row), so large outputs are blocked along whichever axis
keeps every weight read once:

- one row (``M = 1``): one GEMV over the whole weight (BLAS threads it); for a large ``"out_in"``
  weight, a parallel Numba dot-product loop over the weight rows instead (OpenBLAS's transposed
  GEMV streams a large ``[N, K]`` weight well below memory speed);
- row blocks of about :data:`BLOCK_BYTES` of output while a block holds at least
  :data:`MIN_BLOCK_ROWS` rows (the usual case: hidden-size outputs);
- otherwise (very wide outputs such as a vocabulary projection: 58101 columns make 2 MB blocks of
  9 rows, so a batch of 16 would read the 119 MB weight twice, each time as a skinny GEMM): tiles
  of up to :data:`TILE_ROWS` rows, each split into column blocks of about :data:`BLOCK_BYTES`, so
  the weight is read once per row tile by full-height GEMMs (about twice as fast on Marian's
  output projection at 16 rows; figures: benchmarks/RESULTS.md, "Figures moved out of docstrings").

For the GEMMs the ``"out_in"`` layout (PyTorch's) is the faster one: OpenBLAS packs ``[N, K]`` rows
contiguously, while ``"in_out"`` strides by N;
with the dot loop for one row, ``"out_in"`` is also the better layout at batch 1, so the graph pass
:func:`seqjit.graph.passes.prefer_weight_layout` stays off by default.

The epilogue runs on the calling thread: it is a few percent of the GEMM, and handing over between
BLAS's thread pool and Numba's after every block made the whole op several times slower on a busy
2-core machine (each pool's idle threads spin while the other's need the cores).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import get_cython_function_address, intrinsic

from seqjit.kernels import _scipy_blas
from seqjit.kernels.activations.numba_cpu import FASTMATH, activate

from . import spec

_scipy_blas.require("the Numba linear kernel")

#: output bytes per block: small enough to stay in cache between the GEMM and its epilogue,
#: large enough for BLAS to run at full speed
BLOCK_BYTES = 1 << 21
#: row blocks narrower than this switch to column blocks (see the module docstring)
MIN_BLOCK_ROWS = 64
#: rows per tile of the column-blocked path (x's tile is re-read once per column block)
TILE_ROWS = 512
#: the fewest columns in a column block
MIN_BLOCK_COLS = 512
#: one-row products with an "out_in" weight of at least this many bytes use the Numba dot loop
#: (:func:`_gemv_rows`) instead of BLAS's transposed GEMV: weights this large stream from memory,
#: and the loop reads them about 1.5-2x faster; smaller ones stay with BLAS, whose threads are
#: cheaper to start than Numba's parallel loop
DOT_MIN_BYTES = 1 << 23


def _blas(name: str) -> int:
    return get_cython_function_address("scipy.linalg.cython_blas", name)


#: dtype char -> (GEMM, GEMV) addresses in scipy's BLAS (Fortran calling convention: every
#: argument by pointer, 32-bit integers, characters as the first byte of their argument)
_BLAS = {"f": (_blas("sgemm"), _blas("sgemv")), "d": (_blas("dgemm"), _blas("dgemv"))}
_T, _N = ord("T"), ord("N")


@intrinsic
def _ccall(typingctx, fn, args):
    """Call the C function at address ``fn`` with ``args``, a tuple of addresses passed as pointers.

    The address is an argument, not a global, so the functions calling this stay cacheable (Numba
    does not cache functions that hold ctypes pointers).
    """
    if not isinstance(fn, types.Integer) or not isinstance(args, types.BaseTuple):
        return None
    if not all(isinstance(t, types.Integer) for t in args.types):
        return None
    count = len(args.types)

    def codegen(context, builder, sig, llargs):
        ptr = ir.IntType(8).as_pointer()
        f = builder.inttoptr(llargs[0], ir.FunctionType(ir.VoidType(), [ptr] * count).as_pointer())
        builder.call(f, [builder.inttoptr(builder.extract_value(llargs[1], i), ptr) for i in range(count)])
        return context.get_dummy_value()

    return types.none(fn, args), codegen


@njit(cache=True)
def _blas_gemm(gemm, x, w, out_in, out, r0, r1, c0, c1):
    """``out[r0:r1, c0:c1] = x[r0:r1] @ W^T[:, c0:c1]`` in place (x, w, out C-contiguous, K > 0).

    Row-major ``out = x @ W^T`` is, in BLAS's column-major terms, ``out^T = op(A) @ x^T``: an
    ``"out_in"`` weight ``[N, K]`` is a column-major ``K x N`` matrix used transposed, an
    ``"in_out"`` weight ``[K, N]`` a column-major ``N x K`` matrix used as is. A column range of the
    output is a row range of ``out^T`` with the full leading dimension N.
    """
    k = x.shape[1]
    n = out.shape[1]
    size = x.itemsize
    # transa, transb, m, n, k, lda, ldb, ldc
    p = np.empty(8, np.int32)
    p[0] = _T if out_in else _N
    p[1] = _N
    p[2] = c1 - c0
    p[3] = r1 - r0
    p[4] = k
    p[5] = k if out_in else n
    p[6] = k
    p[7] = n
    s = np.empty(2, x.dtype)  # alpha, beta
    s[0] = 1.0
    s[1] = 0.0
    ap, sp = p.ctypes.data, s.ctypes.data
    a = w.ctypes.data + (c0 * k if out_in else c0) * size
    b = x.ctypes.data + r0 * k * size
    c = out.ctypes.data + (r0 * n + c0) * size
    _ccall(gemm, (ap, ap + 4, ap + 8, ap + 12, ap + 16, sp, a, ap + 20, b, ap + 24, sp + size, c, ap + 28))
    return p[0] + s[0]  # (keeps p and s alive across the call)


@njit(cache=True)
def _blas_gemv(gemv, x, w, out_in, out):
    """``out = x @ W^T``: x ``[K]`` (K > 0), out ``[N]``."""
    n = out.shape[0]
    k = x.shape[0]
    # trans, rows and columns of the column-major A, lda, increment
    p = np.empty(5, np.int32)
    p[0] = _T if out_in else _N
    p[1] = k if out_in else n
    p[2] = n if out_in else k
    p[3] = k if out_in else n
    p[4] = 1
    s = np.empty(2, x.dtype)
    s[0] = 1.0
    s[1] = 0.0
    ap, sp = p.ctypes.data, s.ctypes.data
    _ccall(gemv, (ap, ap + 4, ap + 8, sp, w.ctypes.data, ap + 12, x.ctypes.data, ap + 16, sp + x.itemsize,
                  out.ctypes.data, ap + 16))
    return p[0] + s[0]


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _epilogue(bias, code, out, r0, r1, c0, c1):
    """``out[r0:r1, c0:c1] = activation(out + bias)``."""
    for r in range(r0, r1):
        for j in range(c0, c1):
            out[r, j] = activate(out[r, j] + bias[j], code)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _linear_blocks(gemm, x, w, out_in, bias, code, epilogue, out, block_bytes, min_rows, tile_rows, min_cols):
    m, n = out.shape
    itemsize = out.itemsize
    rows = max(1, block_bytes // (n * itemsize))
    if rows >= m or rows >= min_rows:
        for r0 in range(0, m, rows):
            r1 = min(m, r0 + rows)
            _blas_gemm(gemm, x, w, out_in, out, r0, r1, 0, n)
            if epilogue:
                _epilogue(bias, code, out, r0, r1, 0, n)
        return
    for r0 in range(0, m, tile_rows):
        r1 = min(m, r0 + tile_rows)
        cols = max(min_cols, block_bytes // ((r1 - r0) * itemsize))
        for c0 in range(0, n, cols):
            c1 = min(n, c0 + cols)
            _blas_gemm(gemm, x, w, out_in, out, r0, r1, c0, c1)
            if epilogue:
                _epilogue(bias, code, out, r0, r1, c0, c1)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _gemv_blas(gemv, x, w, out_in, bias, code, epilogue, out):
    _blas_gemv(gemv, x, w, out_in, out)
    if epilogue:
        for j in range(out.shape[0]):
            out[j] = activate(out[j] + bias[j], code)


#: weight rows per task of the dot loop
_DOT_ROWS = 64


@njit(cache=True, fastmath=FASTMATH | {"reassoc"}, error_model="numpy")
def _dot_row(w, j, x, zero):
    """``w[j] . x``, summed in vector lanes (reassociated, as BLAS does); its own function so that the
    activation after it keeps :data:`FASTMATH` (no reassociation)."""
    s = zero
    for i in range(x.shape[0]):
        s += w[j, i] * x[i]
    return s


@njit(cache=True, fastmath=FASTMATH, error_model="numpy", parallel=True)
def _gemv_rows(x, w, bias, code, epilogue, out):
    """``out = activation(w @ x + bias)`` for an ``"out_in"`` weight ``[N, K]``: one dot product per
    weight row, the rows split over Numba's threads."""
    n = w.shape[0]
    zero = np.zeros(1, out.dtype)[0]
    tasks = (n + _DOT_ROWS - 1) // _DOT_ROWS
    for t in prange(tasks):
        for j in range(t * _DOT_ROWS, min(n, t * _DOT_ROWS + _DOT_ROWS)):
            s = _dot_row(w, j, x, zero)
            out[j] = activate(s + bias[j], code) if epilogue else s


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
    epilogue = b is not None or code != 0
    bias = b if b is not None else _zeros_cached(n, o2.dtype.str)
    if x2.shape[1] == 0:  # K = 0: BLAS is not called with an empty inner dimension
        o2[...] = 0
        if epilogue:
            _epilogue(bias, code, o2, 0, m, 0, n)
        return result
    gemm, gemv = _BLAS[o2.dtype.char]
    if m == 1:
        if out_in and w.nbytes >= DOT_MIN_BYTES:
            _gemv_rows(x2[0], w, bias, code, epilogue, o2[0])
        else:
            _gemv_blas(gemv, x2[0], w, out_in, bias, code, epilogue, o2[0])
        return result
    _linear_blocks(gemm, x2, w, out_in, bias, code, epilogue, o2, BLOCK_BYTES, MIN_BLOCK_ROWS, TILE_ROWS, MIN_BLOCK_COLS)
    return result
