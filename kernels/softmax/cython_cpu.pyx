# cython: language_level=3
"""Cython CPU softmax / log_softmax: rows in parallel (OpenMP when built with it), three passes per
row (max, exponentials and their sum, write).

float32 rows use the vectorisable ``exp_f32`` of kernels/_vecmath.pxi and keep eight partial maxima
and sums (gcc does not reorder a single float reduction, so without them those loops would run one
element at a time); float64 rows use libm's ``exp``.

Non-finite rows (:mod:`spec`) leave the normal path on a non-finite row max (+inf, or -inf: nothing
kept above -inf, where the max ignored any NaN) or a NaN sum of exponentials (``exp`` of a kept NaN is
NaN): one compare per row on finite input.
"""
import numpy as np
from cython.parallel cimport prange
from libc.math cimport exp, log, INFINITY, NAN

from seqjit.kernels._threads import get_num_threads
from . import spec

include "../_vecmath.pxi"

ctypedef fused real:
    float
    double

cdef enum:
    _LANES = 8  # literal 8 in the range() steps below (Cython needs a literal step)
    _PARALLEL_MIN = 32768


cdef inline void _fill(real* out, Py_ssize_t n, real value) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        out[j] = value


cdef bint _kept_nan(const real* x, const unsigned char* mask, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        if (mask == NULL or mask[j]) and x[j] != x[j]:
            return True
    return False


cdef void _special_row(const real* x, const unsigned char* mask, real* out, Py_ssize_t n, real m,
                       bint use_log) noexcept nogil:
    """A row whose kept max is +inf or -inf: NaN for a kept +inf or NaN, else (nothing kept above
    -inf) zeros / -inf."""
    if m == INFINITY or _kept_nan(x, mask, n):
        _fill(out, n, <real>NAN)
    else:
        _fill(out, n, <real>(-INFINITY if use_log else 0))


cdef float _max_f32(const float* x, const unsigned char* mask, Py_ssize_t n) noexcept nogil:
    cdef float acc[_LANES]
    cdef float v, m
    cdef Py_ssize_t j, t, nb = n - n % _LANES
    for t in range(_LANES):
        acc[t] = -INFINITY
    if mask == NULL:
        for j in range(0, nb, 8):
            for t in range(_LANES):
                v = x[j + t]
                acc[t] = v if v > acc[t] else acc[t]
    else:
        for j in range(0, nb, 8):
            for t in range(_LANES):
                v = x[j + t] if mask[j + t] else -INFINITY
                acc[t] = v if v > acc[t] else acc[t]
    m = -INFINITY
    for t in range(_LANES):
        m = acc[t] if acc[t] > m else m
    for j in range(nb, n):
        if (mask == NULL or mask[j]) and x[j] > m:
            m = x[j]
    return m


cdef float _sum_f32(const float* y, Py_ssize_t n) noexcept nogil:
    cdef float acc[_LANES]
    cdef float s = 0
    cdef Py_ssize_t j, t, nb = n - n % _LANES
    for t in range(_LANES):
        acc[t] = 0
    for j in range(0, nb, 8):
        for t in range(_LANES):
            acc[t] += y[j + t]
    for t in range(_LANES):
        s += acc[t]
    for j in range(nb, n):
        s += y[j]
    return s


cdef void _row_f32(const float* x, const unsigned char* mask, float* out, Py_ssize_t n,
                   bint use_log) noexcept nogil:
    cdef Py_ssize_t j
    cdef float m = _max_f32(x, mask, n), total, e
    if m == INFINITY or m == -INFINITY:
        _special_row(x, mask, out, n, m, use_log)
        return
    # exponentials into out (masked ones 0), then their sum
    if mask == NULL:
        for j in range(n):
            out[j] = exp_f32(x[j] - m)
    else:
        for j in range(n):
            e = exp_f32(x[j] - m)  # unconditionally: a select, not a branch, so it vectorises
            out[j] = e if mask[j] else 0
    total = _sum_f32(out, n)
    if total != total:  # a kept NaN
        _fill(out, n, <float>NAN)
        return
    if use_log:
        total = m + <float>log(total)  # log-sum-exp
        if mask == NULL:
            for j in range(n):
                out[j] = x[j] - total
        else:
            for j in range(n):
                out[j] = (x[j] - total) if mask[j] else -INFINITY
        return
    total = 1 / total
    for j in range(n):
        out[j] = out[j] * total


cdef void _row_f64(const double* x, const unsigned char* mask, double* out, Py_ssize_t n,
                   bint use_log) noexcept nogil:
    cdef Py_ssize_t j
    cdef double m = -INFINITY, total = 0.0, e, lse
    for j in range(n):
        if (mask == NULL or mask[j]) and x[j] > m:
            m = x[j]
    if m == INFINITY or m == -INFINITY:
        _special_row(x, mask, out, n, m, use_log)
        return
    if use_log:
        for j in range(n):
            if mask == NULL or mask[j]:
                total += exp(x[j] - m)
        if total != total:  # a kept NaN
            _fill(out, n, <double>NAN)
            return
        lse = m + log(total)
        for j in range(n):
            out[j] = (x[j] - lse) if (mask == NULL or mask[j]) else -INFINITY
        return
    for j in range(n):
        if mask == NULL or mask[j]:
            e = exp(x[j] - m)
            out[j] = e
            total += e
        else:
            out[j] = 0.0
    if total != total:
        _fill(out, n, <double>NAN)
        return
    total = 1.0 / total
    for j in range(n):
        out[j] = out[j] * total


cdef void _rows(const real[:, ::1] x, const unsigned char[:, ::1] mask, bint has_mask,
                real[:, ::1] out, bint use_log, int threads) noexcept nogil:
    cdef Py_ssize_t r, n = x.shape[1]
    for r in prange(x.shape[0], schedule="static", num_threads=threads):
        if real is float:
            _row_f32(&x[r, 0], &mask[r, 0] if has_mask else NULL, &out[r, 0], n, use_log)
        else:
            _row_f64(&x[r, 0], &mask[r, 0] if has_mask else NULL, &out[r, 0], n, use_log)


_NO_MASK = np.ones((1, 1), dtype=np.uint8)


def _run(x, mask, out, bint use_log):
    x2, m2, o2, result = spec.prepare(x, mask, out)
    if x2.size == 0:
        return result
    cdef bint has_mask = m2 is not None
    cdef const unsigned char[:, ::1] mv = m2 if has_mask else _NO_MASK
    cdef int threads = get_num_threads() if (x2.size >= _PARALLEL_MIN and x2.shape[0] > 1) else 1
    if x2.dtype == np.float32:
        _rows[float](x2, mv, has_mask, o2, use_log, threads)
    else:
        _rows[double](x2, mv, has_mask, o2, use_log, threads)
    return result


def softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, False)


def log_softmax(x, mask=None, *, out=None):
    return _run(x, mask, out, True)
