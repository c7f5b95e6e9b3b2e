# cython: language_level=3
"""Cython CPU additive_attention: batch rows in parallel (OpenMP), each doing ``W_q s``, its scores, a
masked softmax and the weighted sum of its keys (no BLAS: one thread pool; small calls run on one
thread, see ``seqjit.kernels.rnn._driver.workers``). The dot products and the score
``v . tanh(q + keys_proj[b, j])`` are small C kernels with ``omp simd`` reductions (compiled for
AVX-512/AVX2/baseline on GCC/x86-64 Linux); float32 tanh is Eigen's rational approximation (max 4.4
ulp), float64 uses libm."""
import numpy as np

from libc.math cimport exp, INFINITY
from libc.stdint cimport int64_t
from cython.parallel cimport prange

from seqjit.kernels.rnn._driver import workers
from . import spec

cdef extern from *:
    """
    #include <math.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 12
    #define SJA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
    #else
    #define SJA_CLONES
    #endif
    #ifdef _OPENMP
    #define SJA_PRAGMA(x) _Pragma(#x)
    #else
    #define SJA_PRAGMA(x)
    #endif
    #include "../_sj_tanhf.h"  /* sj_tanhf: Eigen's rational float32 tanh */
    /* v . tanh(q + k) over n elements */
    SJA_CLONES static float sja_score_f(const float *v, const float *q, const float *k, long n) {
        float e = 0;
        SJA_PRAGMA(omp simd reduction(+:e))
        for (long a = 0; a < n; a++) e += v[a] * sj_tanhf(q[a] + k[a]);
        return e;
    }
    static double sja_score_d(const double *v, const double *q, const double *k, long n) {
        double e = 0;
        for (long a = 0; a < n; a++) e += v[a] * tanh(q[a] + k[a]);
        return e;
    }
    /* x . y over n elements */
    SJA_CLONES static float sja_dot_f(const float *x, const float *y, long n) {
        float e = 0;
        SJA_PRAGMA(omp simd reduction(+:e))
        for (long a = 0; a < n; a++) e += x[a] * y[a];
        return e;
    }
    SJA_CLONES static double sja_dot_d(const double *x, const double *y, long n) {
        double e = 0;
        SJA_PRAGMA(omp simd reduction(+:e))
        for (long a = 0; a < n; a++) e += x[a] * y[a];
        return e;
    }
    """
    float sja_score_f(const float *v, const float *q, const float *k, long n) noexcept nogil
    double sja_score_d(const double *v, const double *q, const double *k, long n) noexcept nogil
    float sja_dot_f(const float *x, const float *y, long n) noexcept nogil
    double sja_dot_d(const double *x, const double *y, long n) noexcept nogil

ctypedef fused real:
    float
    double


cdef void _row(const real[:, ::1] query, const real[:, ::1] w_q, real[:, ::1] qp, const real[:, :, ::1] keys_proj,
               const real[:, :, ::1] keys, const real[::1] v, long b, long n, real[:, ::1] context,
               real[:, ::1] weights) noexcept nogil:
    cdef long L = keys_proj.shape[1], A = keys_proj.shape[2], Dq = query.shape[1], Dk = keys.shape[2], j, d, a
    cdef double top = -INFINITY, total = 0.0
    cdef real e, w
    for a in range(A):  # qp[b] = w_q @ query[b]
        if real is float:
            qp[b, a] = sja_dot_f(&w_q[a, 0], &query[b, 0], Dq)
        else:
            qp[b, a] = sja_dot_d(&w_q[a, 0], &query[b, 0], Dq)
    for j in range(n):
        if real is float:
            e = sja_score_f(&v[0], &qp[b, 0], &keys_proj[b, j, 0], A)
        else:
            e = sja_score_d(&v[0], &qp[b, 0], &keys_proj[b, j, 0], A)
        weights[b, j] = e
        if e > top:
            top = e
    for j in range(n):
        w = <real>exp(weights[b, j] - top)
        weights[b, j] = w
        total += w
    for j in range(n, L):
        weights[b, j] = 0
    for d in range(Dk):
        context[b, d] = 0
    if n == 0:
        return
    total = 1.0 / total
    for j in range(n):
        w = <real>(weights[b, j] * total)
        weights[b, j] = w
        for d in range(Dk):
            context[b, d] = context[b, d] + w * keys[b, j, d]


cdef void _attend(const real[:, ::1] query, const real[:, :, ::1] keys_proj, const real[:, :, ::1] keys,
                  const real[:, ::1] w_q, const real[::1] v, const int64_t[::1] lengths,
                  real[:, ::1] qp, real[:, ::1] context, real[:, ::1] weights, int threads) noexcept nogil:
    cdef long b
    for b in prange(query.shape[0], schedule="static", num_threads=threads):
        _row(query, w_q, qp, keys_proj, keys, v, b, lengths[b], context, weights)


def additive_attention(query, keys_proj, keys, w_q, v, *, lengths=None):
    """See :func:`seqjit.kernels.additive_attention.reference.additive_attention`."""
    p = spec.prepare(query, keys_proj, keys, w_q, v, lengths)
    B, L, A = p.keys_proj.shape
    if B == 0:
        return p.context, p.weights
    qp = np.empty((B, max(A, 1)), p.query.dtype)
    cdef int threads = workers(B * (A * p.query.shape[1] + L * (A + p.keys.shape[2])))
    if p.query.dtype == np.float32:
        _attend[float](p.query, p.keys_proj, p.keys, p.w_q, p.v, p.lengths, qp, p.context, p.weights, threads)
    else:
        _attend[double](p.query, p.keys_proj, p.keys, p.w_q, p.v, p.lengths, qp, p.context, p.weights, threads)
    return p.context, p.weights
