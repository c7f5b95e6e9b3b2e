# cython: language_level=3
"""Cython CPU activations: fixed-size chunks in parallel (OpenMP when built with it), one
vectorised loop per chunk (see _act.pxi)."""
import numpy as np
from cython.parallel cimport prange

from seqjit.kernels._threads import get_num_threads
from . import spec

include "_act.pxi"

cdef enum:
    _CHUNK = 16384


cdef void _apply_f32(const float[::1] x, float[::1] out, int code, int threads) noexcept nogil:
    cdef Py_ssize_t n = x.shape[0], c, start, stop
    cdef Py_ssize_t chunks = (n + _CHUNK - 1) // _CHUNK
    for c in prange(chunks, schedule="static", num_threads=threads):
        start = c * _CHUNK
        stop = min(start + _CHUNK, n)
        act_row_f32(&x[start], NULL, &out[start], stop - start, code)


cdef void _apply_f64(const double[::1] x, double[::1] out, int code, int threads) noexcept nogil:
    cdef Py_ssize_t n = x.shape[0], c, start, stop
    cdef Py_ssize_t chunks = (n + _CHUNK - 1) // _CHUNK
    for c in prange(chunks, schedule="static", num_threads=threads):
        start = c * _CHUNK
        stop = min(start + _CHUNK, n)
        act_row_f64(&x[start], NULL, &out[start], stop - start, code)


def _run(x, out, int code):
    x1, o1, result = spec.prepare(x, out)
    cdef Py_ssize_t n = x1.shape[0]
    if n == 0:
        return result
    cdef int threads = get_num_threads() if n >= 4 * _CHUNK else 1
    if x1.dtype == np.float32:
        _apply_f32(x1, o1, code, threads)
    else:
        _apply_f64(x1, o1, code, threads)
    return result


def relu(x, *, out=None):
    return _run(x, out, spec.RELU)


def gelu(x, *, approximate="none", out=None):
    return _run(x, out, spec.gelu_code(approximate))


def silu(x, *, out=None):
    return _run(x, out, spec.SILU)


def tanh(x, *, out=None):
    return _run(x, out, spec.TANH)
