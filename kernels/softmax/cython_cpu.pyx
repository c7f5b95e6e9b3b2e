# cython: language_level=3
"""Cython CPU softmax / log_softmax: rows in parallel (OpenMP when built with it)."""
import numpy as np
from cython.parallel cimport prange
from libc.math cimport exp, log, INFINITY

from seqjit.kernels._threads import get_num_threads
from . import spec

ctypedef fused real:
    float
    double


cdef void _row(const real[:, ::1] x, const unsigned char[:, ::1] mask, bint has_mask,
               real[:, ::1] out, Py_ssize_t r, bint use_log) noexcept nogil:
    cdef Py_ssize_t j, n = x.shape[1]
    cdef double m = -INFINITY, total = 0.0, e, lse
    for j in range(n):
        if (not has_mask or mask[r, j]) and x[r, j] > m:
            m = x[r, j]
    if m == -INFINITY:
        for j in range(n):
            out[r, j] = -INFINITY if use_log else 0.0
        return
    if use_log:
        for j in range(n):
            if not has_mask or mask[r, j]:
                total += exp(x[r, j] - m)
        lse = m + log(total)
        for j in range(n):
            out[r, j] = (x[r, j] - lse) if (not has_mask or mask[r, j]) else -INFINITY
        return
    for j in range(n):
        if not has_mask or mask[r, j]:
            e = exp(x[r, j] - m)
            out[r, j] = e
            total += e
        else:
            out[r, j] = 0.0
    total = 1.0 / total
    for j in range(n):
        out[r, j] = out[r, j] * total


cdef void _rows(const real[:, ::1] x, const unsigned char[:, ::1] mask, bint has_mask,
                real[:, ::1] out, bint use_log, int threads) noexcept nogil:
    cdef Py_ssize_t r
    for r in prange(x.shape[0], schedule="static", num_threads=threads):
        _row(x, mask, has_mask, out, r, use_log)


_NO_MASK = np.ones((1, 1), dtype=np.uint8)


def _run(x, mask, out, bint use_log):
    x2, m2, o2, result = spec.prepare(x, mask, out)
    if x2.size == 0:
        return result
    cdef bint has_mask = m2 is not None
    cdef const unsigned char[:, ::1] mv = m2 if has_mask else _NO_MASK
    cdef int threads = get_num_threads()
    if x2.dtype == np.float32:
        _rows[float](x2, mv, has_mask, o2, use_log, threads)
    else:
        _rows[double](x2, mv, has_mask, o2, use_log, threads)
    return result


def softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, False)


def log_softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, True)
