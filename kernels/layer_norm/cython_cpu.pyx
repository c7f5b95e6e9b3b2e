# cython: language_level=3
"""Cython CPU layer_norm: rows in parallel (OpenMP when built with it); per row two double
reduction passes (mean, then the variance about it) and one write pass."""
import numpy as np
from cython.parallel cimport prange
from libc.math cimport sqrt

from seqjit.kernels._threads import get_num_threads
from . import spec

ctypedef fused real:
    float
    double

cdef enum:
    _PARALLEL_MIN = 32768


cdef void _row(const real* x, const real* w, const real* b, double eps, real* y,
               Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t j
    # four partial sums: lets gcc keep several adds in flight without reassociating a single sum
    cdef double s0 = 0, s1 = 0, s2 = 0, s3 = 0, mean, t, rstd
    for j in range(0, d - 3, 4):
        s0 += x[j]
        s1 += x[j + 1]
        s2 += x[j + 2]
        s3 += x[j + 3]
    for j in range((d // 4) * 4, d):
        s0 += x[j]
    mean = (s0 + s1 + s2 + s3) / d
    s0 = 0; s1 = 0; s2 = 0; s3 = 0
    for j in range(0, d - 3, 4):
        t = x[j] - mean
        s0 += t * t
        t = x[j + 1] - mean
        s1 += t * t
        t = x[j + 2] - mean
        s2 += t * t
        t = x[j + 3] - mean
        s3 += t * t
    for j in range((d // 4) * 4, d):
        t = x[j] - mean
        s0 += t * t
    rstd = 1.0 / sqrt((s0 + s1 + s2 + s3) / d + eps)
    if w != NULL and b != NULL:
        for j in range(d):
            y[j] = <real>((x[j] - mean) * rstd * w[j] + b[j])
    elif w != NULL:
        for j in range(d):
            y[j] = <real>((x[j] - mean) * rstd * w[j])
    elif b != NULL:
        for j in range(d):
            y[j] = <real>((x[j] - mean) * rstd + b[j])
    else:
        for j in range(d):
            y[j] = <real>((x[j] - mean) * rstd)


cdef void _rows(const real[:, ::1] x, const real* w, const real* b, double eps, real[:, ::1] out,
                int threads) noexcept nogil:
    cdef Py_ssize_t r, d = x.shape[1]
    for r in prange(x.shape[0], schedule="static", num_threads=threads):
        _row(&x[r, 0], w, b, eps, &out[r, 0], d)




def layer_norm(x, weight=None, bias=None, *, eps=1e-5, out=None):
    x2, w, b, eps, o2, result = spec.prepare(x, weight, bias, eps, out)
    if x2.size == 0:
        return result
    cdef int threads = get_num_threads() if (x2.size >= _PARALLEL_MIN and x2.shape[0] > 1) else 1
    cdef const float[::1] w32
    cdef const float[::1] b32
    cdef const double[::1] w64
    cdef const double[::1] b64
    if x2.dtype == np.float32:
        if w is not None:
            w32 = w
        if b is not None:
            b32 = b
        _rows[float](x2, &w32[0] if w is not None else NULL, &b32[0] if b is not None else NULL,
                     eps, o2, threads)
    else:
        if w is not None:
            w64 = w
        if b is not None:
            b64 = b
        _rows[double](x2, &w64[0] if w is not None else NULL, &b64[0] if b is not None else NULL,
                      eps, o2, threads)
    return result
