# cython: language_level=3
"""Cython CPU embedding (gather, scale and positional add in one pass over the output) and
sinusoidal position tables; rows in parallel (OpenMP when built with it) when large."""
import numpy as np
from cython.parallel cimport prange
from libc.math cimport sin, cos, pow

from seqjit.kernels._threads import get_num_threads
from . import spec

ctypedef fused real:
    float
    double

cdef enum:
    _PARALLEL_MIN = 32768


cdef void _gather(const long long[::1] ids, const real[:, ::1] table, double scale,
                  const real* positions, Py_ssize_t n_pos, real[:, ::1] out, int threads) noexcept nogil:
    cdef Py_ssize_t i, j, d = table.shape[1]
    cdef const real* src
    cdef const real* pos
    cdef real* dst
    for i in prange(ids.shape[0], schedule="static", num_threads=threads):
        src = &table[ids[i], 0]
        dst = &out[i, 0]
        if positions == NULL:
            for j in range(d):
                dst[j] = <real>(src[j] * scale)
        else:
            pos = positions + (i % n_pos) * d
            for j in range(d):
                dst[j] = <real>(src[j] * scale + pos[j])


def embedding(ids, table, *, scale=1.0, positions=None, out=None):
    ids1, table, scale, positions, o2, result = spec.prepare(ids, table, scale, positions, out)
    if o2.size == 0:
        return result
    cdef int threads = get_num_threads() if (o2.size >= _PARALLEL_MIN and ids1.shape[0] > 1) else 1
    cdef const float[:, ::1] p32
    cdef const double[:, ::1] p64
    cdef Py_ssize_t n_pos = positions.shape[0] if positions is not None else 1
    if table.dtype == np.float32:
        if positions is not None:
            p32 = positions
        _gather[float](ids1, table, scale, &p32[0, 0] if positions is not None else NULL, n_pos, o2, threads)
    else:
        if positions is not None:
            p64 = positions
        _gather[double](ids1, table, scale, &p64[0, 0] if positions is not None else NULL, n_pos, o2, threads)
    return result


cdef void _positions(long long offset, bint halves, real[:, ::1] out, double[::1] denom,
                     int threads) noexcept nogil:
    cdef Py_ssize_t i, j, length = out.shape[0], dim = out.shape[1], n_sin = (dim + 1) // 2
    cdef double p
    for i in prange(length, schedule="static", num_threads=threads):
        p = <double>(offset + i)
        for j in range(dim):
            if halves:
                if j < n_sin:
                    out[i, j] = <real>sin(p / denom[2 * j])
                else:
                    out[i, j] = <real>cos(p / denom[2 * (j - n_sin) + 1])
            elif j % 2 == 0:
                out[i, j] = <real>sin(p / denom[j])
            else:
                out[i, j] = <real>cos(p / denom[j])


def sinusoidal_positions(length, dim, *, layout="interleaved", offset=0, dtype=np.float32):
    length, dim, offset, halves, dtype = spec.check_positions_args(length, dim, layout, offset, dtype)
    out = np.empty((length, dim), dtype=dtype)
    if out.size == 0:
        return out
    cdef double[::1] denom = np.empty(dim)
    cdef Py_ssize_t j
    for j in range(dim):
        denom[j] = pow(10000.0, 2.0 * (j // 2) / dim)
    cdef int threads = get_num_threads() if out.size >= _PARALLEL_MIN else 1
    if dtype == np.float32:
        _positions[float](offset, halves, out, denom, threads)
    else:
        _positions[double](offset, halves, out, denom, threads)
    return out
