# cython: language_level=3
"""Cython CPU linear: BLAS (scipy.linalg.cython_blas sgemm/dgemm, sgemv/dgemv for one row) into
the output, then the bias + activation epilogue over the block just written, while it is in cache.
BLAS threads the GEMM (``seqjit.set_num_threads`` sets its thread count); the epilogue runs on the
calling thread.

Row-major ``out[M, N] = x[M, K] @ W^T`` is, in BLAS's column-major terms, ``out^T = op(W) @ x^T``:
``W`` ``[N, K]`` ("out_in") is a column-major ``K x N`` matrix used transposed; ``W`` ``[K, N]``
("in_out") is a column-major ``N x K`` matrix used as is.
"""
import numpy as np
from libc.string cimport memset
from scipy.linalg.cython_blas cimport sgemm, dgemm, sgemv, dgemv

from . import spec

include "../activations/_act.pxi"

#: output bytes per row block (GEMM, then its epilogue while the block is in cache). The epilogue
#: runs on the calling thread: handing over between BLAS's threads and OpenMP's after every block
#: costs more than the epilogue itself on a busy machine (see numba_cpu.py).
cdef enum:
    _BLOCK_BYTES = 2097152


cdef void _linear_f32(const float[:, ::1] x, const float[:, ::1] w, const float* bias, bint out_in,
                      int code, float[:, ::1] out) noexcept nogil:
    cdef int m = <int>x.shape[0], k = <int>x.shape[1], n = <int>out.shape[1]
    cdef int inc = 1, rows, lda = k if out_in else n
    cdef int block = max(8, _BLOCK_BYTES // (n * 4))
    cdef float one = 1.0, zero = 0.0
    cdef char* ta = b"T" if out_in else b"N"
    cdef char* tn = b"N"
    cdef Py_ssize_t r0, r
    if k == 0:
        memset(&out[0, 0], 0, m * n * sizeof(float))
    elif m == 1:
        if out_in:
            sgemv(ta, &k, &n, &one, <float*>&w[0, 0], &lda, <float*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
        else:
            sgemv(ta, &n, &k, &one, <float*>&w[0, 0], &lda, <float*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
    if (k == 0 or m == 1) and (bias != NULL or code != 0):
        for r in range(m):
            act_row_f32(&out[r, 0], bias, &out[r, 0], n, code)
    if k == 0 or m == 1:
        return
    r0 = 0
    while r0 < m:
        rows = min(block, m - <int>r0)
        sgemm(ta, tn, &n, &rows, &k, &one, <float*>&w[0, 0], &lda, <float*>&x[r0, 0], &k, &zero,
              &out[r0, 0], &n)
        if bias != NULL or code != 0:
            for r in range(r0, r0 + rows):
                act_row_f32(&out[r, 0], bias, &out[r, 0], n, code)
        r0 += rows


cdef void _linear_f64(const double[:, ::1] x, const double[:, ::1] w, const double* bias, bint out_in,
                      int code, double[:, ::1] out) noexcept nogil:
    cdef int m = <int>x.shape[0], k = <int>x.shape[1], n = <int>out.shape[1]
    cdef int inc = 1, rows, lda = k if out_in else n
    cdef int block = max(8, _BLOCK_BYTES // (n * 8))
    cdef double one = 1.0, zero = 0.0
    cdef char* ta = b"T" if out_in else b"N"
    cdef char* tn = b"N"
    cdef Py_ssize_t r0, r
    if k == 0:
        memset(&out[0, 0], 0, m * n * sizeof(double))
    elif m == 1:
        if out_in:
            dgemv(ta, &k, &n, &one, <double*>&w[0, 0], &lda, <double*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
        else:
            dgemv(ta, &n, &k, &one, <double*>&w[0, 0], &lda, <double*>&x[0, 0], &inc, &zero, &out[0, 0], &inc)
    if (k == 0 or m == 1) and (bias != NULL or code != 0):
        for r in range(m):
            act_row_f64(&out[r, 0], bias, &out[r, 0], n, code)
    if k == 0 or m == 1:
        return
    r0 = 0
    while r0 < m:
        rows = min(block, m - <int>r0)
        dgemm(ta, tn, &n, &rows, &k, &one, <double*>&w[0, 0], &lda, <double*>&x[r0, 0], &k, &zero,
              &out[r0, 0], &n)
        if bias != NULL or code != 0:
            for r in range(r0, r0 + rows):
                act_row_f64(&out[r, 0], bias, &out[r, 0], n, code)
        r0 += rows


def linear(x, weight, bias=None, *, activation=None, weight_layout="out_in", out=None):
    x2, w, b, code, out_in, o2, result = spec.prepare(x, weight, bias, activation, weight_layout, out)
    if o2.shape[0] == 0 or o2.shape[1] == 0:
        return result
    cdef const float[::1] b32
    cdef const double[::1] b64
    if x2.dtype == np.float32:
        if b is not None:
            b32 = b
        _linear_f32(x2, w, &b32[0] if b is not None else NULL, out_in, code, o2)
    else:
        if b is not None:
            b64 = b
        _linear_f64(x2, w, &b64[0] if b is not None else NULL, out_in, code, o2)
    return result
