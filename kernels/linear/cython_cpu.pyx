# cython: language_level=3
"""Cython CPU linear: BLAS (sgemm/dgemm, sgemv/dgemv for one row: scipy's OpenBLAS with the ``blas``
extra, else the portable loops of kernels/_sj_blas_fallback.h, see kernels/_blas_ptrs.pxi) written
straight into the output, then the bias + activation epilogue over the block just written, while it
is in cache. OpenBLAS threads the GEMM (``seqjit.set_num_threads`` sets its thread count); the epilogue
runs on the calling thread.

Row-major ``out[M, N] = x[M, K] @ W^T`` is, in BLAS's column-major terms, ``out^T = op(W) @ x^T``:
``W`` ``[N, K]`` ("out_in") is a column-major ``K x N`` matrix used transposed; ``W`` ``[K, N]``
("in_out") is a column-major ``N x K`` matrix used as is. A column range of the output is a row
range of ``out^T`` with the full leading dimension N, so a GEMM can write any block in place.

Blocking as in the Numba kernel (see numba_cpu.py): row blocks of about :data:`BLOCK_BYTES` of
output while a block holds at least :data:`MIN_BLOCK_ROWS` rows; for wider outputs (a vocabulary
projection) tiles of up to :data:`TILE_ROWS` rows split into column blocks, so the weight is read
once per tile instead of once per few-row block.
"""
import numpy as np
from libc.string cimport memset

from . import spec

include "../activations/_act.pxi"
include "../_blas_ptrs.pxi"

#: output bytes per block (GEMM, then its epilogue while the block is in cache). The epilogue runs
#: on the calling thread: handing over between BLAS's threads and OpenMP's after every block costs
#: more than the epilogue itself on a busy machine (see numba_cpu.py).
BLOCK_BYTES = 1 << 21
#: row blocks narrower than this switch to column blocks in row tiles
MIN_BLOCK_ROWS = 64
#: rows per tile of the column-blocked path
TILE_ROWS = 512
#: the fewest columns in a column block
MIN_BLOCK_COLS = 512

ctypedef fused real:
    float
    double


cdef inline void _epilogue(real* out, const real* bias, int code, int rows, int cols, int ld) noexcept nogil:
    cdef int r
    for r in range(rows):
        if real is float:
            act_row_f32(out + <Py_ssize_t>r * ld, bias, out + <Py_ssize_t>r * ld, cols, code)
        else:
            act_row_f64(out + <Py_ssize_t>r * ld, bias, out + <Py_ssize_t>r * ld, cols, code)


cdef inline void _gemm(bint out_in, int rows, int cols, int k, const real* w, int n, const real* x,
                       real* out) noexcept nogil:
    """``out[:rows, :cols] = x[:rows] @ W^T[:, :cols]`` (out's leading dimension n; ``w`` points at
    the first output column's weights)."""
    cdef real one = 1.0, zero = 0.0
    cdef int lda = k if out_in else n
    cdef char* ta = b"T" if out_in else b"N"
    cdef char* tn = b"N"
    if real is float:
        sgemm(ta, tn, &cols, &rows, &k, &one, <float*>w, &lda, <float*>x, &k, &zero, out, &n)
    else:
        dgemm(ta, tn, &cols, &rows, &k, &one, <double*>w, &lda, <double*>x, &k, &zero, out, &n)


cdef void _linear(const real[:, ::1] x, const real[:, ::1] w, const real* bias, bint out_in, int code,
                  real[:, ::1] out, Py_ssize_t block_bytes, int min_rows, int tile_rows, int min_cols) noexcept nogil:
    cdef int m = <int>x.shape[0], k = <int>x.shape[1], n = <int>out.shape[1]
    cdef int inc = 1, lda = k if out_in else n
    cdef bint epilogue = bias != NULL or code != 0
    cdef real one = 1.0, zero = 0.0
    cdef char* ta = b"T" if out_in else b"N"
    cdef int rows, r0, r1, cols, c0, c1
    cdef Py_ssize_t per_row = <Py_ssize_t>n * <Py_ssize_t>sizeof(real)
    if k == 0:
        memset(&out[0, 0], 0, <Py_ssize_t>m * per_row)
        if epilogue:
            _epilogue(&out[0, 0], bias, code, m, n, n)
        return
    if m == 1:
        if real is float:
            if out_in:
                sgemv(ta, &k, &n, &one, <float*>&w[0, 0], &lda, <float*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
            else:
                sgemv(ta, &n, &k, &one, <float*>&w[0, 0], &lda, <float*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
        else:
            if out_in:
                dgemv(ta, &k, &n, &one, <double*>&w[0, 0], &lda, <double*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
            else:
                dgemv(ta, &n, &k, &one, <double*>&w[0, 0], &lda, <double*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
        if epilogue:
            _epilogue(&out[0, 0], bias, code, 1, n, n)
        return
    rows = <int>max(1, block_bytes // per_row)
    if rows >= m or rows >= min_rows:
        r0 = 0
        while r0 < m:
            r1 = min(m, r0 + rows)
            _gemm(out_in, r1 - r0, n, k, &w[0, 0], n, &x[r0, 0], &out[r0, 0])
            if epilogue:
                _epilogue(&out[r0, 0], bias, code, r1 - r0, n, n)
            r0 = r1
        return
    r0 = 0
    while r0 < m:
        r1 = min(m, r0 + tile_rows)
        cols = <int>max(<Py_ssize_t>min_cols, block_bytes // (<Py_ssize_t>(r1 - r0) * <Py_ssize_t>sizeof(real)))
        c0 = 0
        while c0 < n:
            c1 = min(n, c0 + cols)
            _gemm(out_in, r1 - r0, c1 - c0, k, &w[c0, 0] if out_in else &w[0, c0], n, &x[r0, 0], &out[r0, c0])
            if epilogue:
                _epilogue(&out[r0, c0], (bias + c0) if bias != NULL else NULL, code, r1 - r0, c1 - c0, n)
            c0 = c1
        r0 = r1


def linear(x, weight, bias=None, *, activation=None, weight_layout="out_in", out=None):
    x2, w, b, code, out_in, o2, result = spec.prepare(x, weight, bias, activation, weight_layout, out)
    if o2.shape[0] == 0 or o2.shape[1] == 0:
        return result
    cdef const float[::1] b32
    cdef const double[::1] b64
    cdef Py_ssize_t block_bytes = BLOCK_BYTES
    cdef int min_rows = MIN_BLOCK_ROWS, tile_rows = TILE_ROWS, min_cols = MIN_BLOCK_COLS
    if x2.dtype == np.float32:
        if b is not None:
            b32 = b
        _linear[float](x2, w, &b32[0] if b is not None else NULL, out_in, code, o2, block_bytes, min_rows,
                       tile_rows, min_cols)
    else:
        if b is not None:
            b64 = b
        _linear[double](x2, w, &b64[0] if b is not None else NULL, out_in, code, o2, block_bytes, min_rows,
                        tile_rows, min_cols)
    return result
