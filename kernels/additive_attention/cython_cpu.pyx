# cython: language_level=3
"""Cython CPU additive_attention: batch rows in parallel (OpenMP), each doing ``W_q s``, its scores, a
masked softmax and the weighted sum of its keys (no BLAS: one thread pool; small calls run on one
thread, see ``seqjit.kernels.rnn._driver.workers``). The dot products and the score
``v . tanh(q + keys_proj[b, j])`` are small C kernels with ``omp simd`` reductions (compiled for
AVX-512/AVX2/baseline on GCC/x86-64, picked by CPU features capped by $SEQJIT_ISA: :func:`isa`); float32 tanh is Eigen's rational approximation (max 4.4
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
    #include "_runtime/isa_cap.h"
    /* the float kernels are compiled once per instruction set (SJA_TGT_base/avx2/avx512, name suffix
       _base/_avx2/_avx512) and SJA_PICK calls the one for the level of _runtime/isa_cap.h (the CPU's
       best under $SEQJIT_ISA); compilers other than GCC >= 12 on x86-64 build the baseline only */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 12
    #define SJA_MULTI_ISA 1
    #define SJA_TGT_base
    #define SJA_TGT_avx2 __attribute__((target("arch=x86-64-v3")))
    #define SJA_TGT_avx512 __attribute__((target("arch=x86-64-v4")))
    #define SJA_PICK(fn, ...) (sj_isa_level() == SJ_ISA_AVX512 ? fn##_avx512(__VA_ARGS__) \
        : sj_isa_level() == SJ_ISA_AVX2 ? fn##_avx2(__VA_ARGS__) : fn##_base(__VA_ARGS__))
    static const char *sja_isa(void) { return sj_isa_name(sj_isa_level()); }
    #else
    #define SJA_TGT_base
    #define SJA_PICK(fn, ...) fn##_base(__VA_ARGS__)
    static const char *sja_isa(void) { return "baseline"; }
    #endif
    #ifdef _OPENMP
    #define SJA_PRAGMA(x) _Pragma(#x)
    #else
    #define SJA_PRAGMA(x)
    #endif
    #include "../_sj_tanhf.h"  /* sj_tanhf: Eigen's rational float32 tanh */
    /* v . tanh(q + k) over n elements; x . y over n elements */
    #define SJA_DEFINE(ISA) \\
    SJA_TGT_##ISA static float sja_score_f_##ISA(const float *v, const float *q, const float *k, long n) { \\
        float e = 0; \\
        SJA_PRAGMA(omp simd reduction(+:e)) \\
        for (long a = 0; a < n; a++) e += v[a] * sj_tanhf(q[a] + k[a]); \\
        return e; \\
    } \\
    SJA_TGT_##ISA static float sja_dot_f_##ISA(const float *x, const float *y, long n) { \\
        float e = 0; \\
        SJA_PRAGMA(omp simd reduction(+:e)) \\
        for (long a = 0; a < n; a++) e += x[a] * y[a]; \\
        return e; \\
    } \\
    SJA_TGT_##ISA static double sja_dot_d_##ISA(const double *x, const double *y, long n) { \\
        double e = 0; \\
        SJA_PRAGMA(omp simd reduction(+:e)) \\
        for (long a = 0; a < n; a++) e += x[a] * y[a]; \\
        return e; \\
    }
    SJA_DEFINE(base)
    #ifdef SJA_MULTI_ISA
    SJA_DEFINE(avx2)
    SJA_DEFINE(avx512)
    #endif
    static float sja_score_f(const float *v, const float *q, const float *k, long n) {
        return SJA_PICK(sja_score_f, v, q, k, n);
    }
    static float sja_dot_f(const float *x, const float *y, long n) { return SJA_PICK(sja_dot_f, x, y, n); }
    static double sja_dot_d(const double *x, const double *y, long n) { return SJA_PICK(sja_dot_d, x, y, n); }
    static double sja_score_d(const double *v, const double *q, const double *k, long n) {
        double e = 0;
        for (long a = 0; a < n; a++) e += v[a] * tanh(q[a] + k[a]);
        return e;
    }
    """
    float sja_score_f(const float *v, const float *q, const float *k, long n) noexcept nogil
    double sja_score_d(const double *v, const double *q, const double *k, long n) noexcept nogil
    float sja_dot_f(const float *x, const float *y, long n) noexcept nogil
    double sja_dot_d(const double *x, const double *y, long n) noexcept nogil
    const char* sja_isa() noexcept nogil

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


def isa() -> str:
    """The instruction-set variant the float dot-product and score kernels run: "avx512", "avx2" or
    "baseline" (the CPU's best under $SEQJIT_ISA)."""
    return sja_isa().decode()


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
