# cython: language_level=3
"""Cython CPU attention: float32 with two or more queries (no weights) runs the fused kernel of
``attention/fused.h`` (online softmax, register-blocked micro-kernels, no BLAS; OpenMP over
(batch, head, block of 48-192 queries), variant per instruction set, capped by $SEQJIT_ISA); everything
else the blocked online-softmax algorithm of ``numba_cpu``, described below.

Work items (batch, head, query block) run in an OpenMP ``prange`` with per-thread scratch; each walks
the visible key blocks (wholly hidden ones are skipped), forming the transposed score tile
``S^T = K_blk @ Q_blk^T`` and the update ``P @ V_blk`` with BLAS (s/dgemm: scipy's OpenBLAS with the
``blas`` extra, held to one thread meanwhile, else the portable loops of kernels/_blas_ptrs.pxi) and
the online softmax in between (C below: a float32 ``exp2`` polynomial that vectorises, compiled for
AVX-512 / AVX2 / baseline and picked at run time, capped by $SEQJIT_ISA). Extra memory is O(block) per thread.
"""
import math

import numpy as np
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t
from libc.math cimport INFINITY

from seqjit.kernels._threads import get_num_threads
from . import spec
from ._blas import single_threaded_blas, tile_sizes

include "../_blas_ptrs.pxi"

cdef extern from *:
    """
    #include <math.h>
    #include <string.h>
    #include <stdint.h>
    #include "_runtime/isa_cap.h"
    #include "attention/fused.h"

    /* 2**x for x <= 0, float32: n = round(x) by the 1.5 * 2**23 trick, f = x - n in [-0.5, 0.5],
       Cephes' degree-6 polynomial (< 1 ulp), 2**n from the exponent bits; clamped below at -125. */
    #if defined(__GNUC__) || defined(__clang__)
    #define SJ_INLINE static inline __attribute__((always_inline))
    #else
    #define SJ_INLINE static inline
    #endif
    SJ_INLINE float sj_exp2f(float x) {
        const float magic = 12582912.0f;
        x = x < -125.0f ? -125.0f : x;
        float t = x + magic;
        int ti, mi;
        memcpy(&ti, &t, 4);
        float mf = magic;
        memcpy(&mi, &mf, 4);
        float f = x - (t - magic);
        float p = 1.535336188319500e-4f;
        p = p * f + 1.339887440266574e-3f;
        p = p * f + 9.618437357674640e-3f;
        p = p * f + 5.550332471162809e-2f;
        p = p * f + 2.402264791363012e-1f;
        p = p * f + 6.931472028550421e-1f;
        p = p * f + 1.0f;
        int bits = (ti - mi + 127) << 23;
        float scale;
        memcpy(&scale, &bits, 4);
        return p * scale;
    }

    /* One online-softmax step on the transposed base-2 score tile st [n keys][m queries]: key j0 + j
       is visible to query r iff j0 + j < nvis[r] (all when full). st becomes the unnormalised
       weights; mrow/lrow (running max/sum) are updated; alpha[r] is the accumulator rescale. */
    #define SJ_TILE_BODY(T, EXP2)                                                          \\
        for (int64_t r = 0; r < m; r++) cmax[r] = mrow[r];                                   \\
        for (int64_t j = 0; j < n; j++) {                                                    \\
            const T* row = st + j * m;                                                    \\
            if (full) { for (int64_t r = 0; r < m; r++) cmax[r] = row[r] > cmax[r] ? row[r] : cmax[r]; } \\
            else { for (int64_t r = 0; r < m; r++)                                           \\
                       cmax[r] = (j0 + j < nvis[r] && row[r] > cmax[r]) ? row[r] : cmax[r]; } \\
        }                                                                                 \\
        for (int64_t r = 0; r < m; r++) {                                                    \\
            alpha[r] = cmax[r] > mrow[r] ? EXP2(mrow[r] - cmax[r]) : (T)1;                \\
            lrow[r] *= alpha[r];                                                          \\
            mrow[r] = cmax[r];                                                            \\
        }                                                                                 \\
        for (int64_t j = 0; j < n; j++) {                                                    \\
            T* row = st + j * m;                                                          \\
            if (full) { for (int64_t r = 0; r < m; r++) { T e = EXP2(row[r] - cmax[r]); row[r] = e; lrow[r] += e; } } \\
            else { for (int64_t r = 0; r < m; r++) {                                         \\
                       T e = j0 + j < nvis[r] ? EXP2(row[r] - cmax[r]) : (T)0; row[r] = e; lrow[r] += e; } } \\
        }

    #define SJ_TILE_ARGS(T) T* st, int64_t n, int64_t m, int64_t j0, const int64_t* nvis, int full, \\
                            T* mrow, T* lrow, T* cmax, T* alpha

    static void sj_tile_f_base(SJ_TILE_ARGS(float)) { SJ_TILE_BODY(float, sj_exp2f) }
    #if defined(__GNUC__) && defined(__x86_64__)
    __attribute__((target("avx2,fma"))) static void sj_tile_f_avx2(SJ_TILE_ARGS(float)) { SJ_TILE_BODY(float, sj_exp2f) }
    __attribute__((target("avx512f,fma"))) static void sj_tile_f_avx512(SJ_TILE_ARGS(float)) { SJ_TILE_BODY(float, sj_exp2f) }
    #endif
    static void sj_tile_d(SJ_TILE_ARGS(double)) { SJ_TILE_BODY(double, exp2) }

    typedef void (*sj_tile_f_fn)(SJ_TILE_ARGS(float));
    static sj_tile_f_fn sj_tile_f = sj_tile_f_base;

    /* pick the widest vector ISA this CPU has under $SEQJIT_ISA (_runtime/isa_cap.h; called once
       at import) */
    static const char* sj_init_dispatch(void) {
    #if defined(__GNUC__) && defined(__x86_64__)
        int level = sj_isa_level();
        sj_fa_use(level);
        if (level >= SJ_ISA_AVX512) { sj_tile_f = sj_tile_f_avx512; return "avx512f"; }
        if (level >= SJ_ISA_AVX2) { sj_tile_f = sj_tile_f_avx2; return "avx2"; }
    #endif
        sj_tile_f = sj_tile_f_base;
        sj_fa_use(SJ_ISA_BASE);
        return "baseline";
    }

    /* tests: force one variant ("avx512f", "avx2", "baseline"); returns 0 if this CPU (under
       $SEQJIT_ISA) lacks it */
    static int sj_force_variant(const char* name) {
        if (strcmp(name, "baseline") == 0) { sj_tile_f = sj_tile_f_base; sj_fa_use(SJ_ISA_BASE); return 1; }
    #if defined(__GNUC__) && defined(__x86_64__)
        if (strcmp(name, "avx2") == 0 && sj_isa_level() >= SJ_ISA_AVX2) {
            sj_tile_f = sj_tile_f_avx2; sj_fa_use(SJ_ISA_AVX2); return 1; }
        if (strcmp(name, "avx512f") == 0 && sj_isa_level() >= SJ_ISA_AVX512) {
            sj_tile_f = sj_tile_f_avx512; sj_fa_use(SJ_ISA_AVX512); return 1; }
    #endif
        return 0;
    }

    /* Normalise row[:nv] in place as a base-2 softmax; row[nv:n] = 0 (the weights path). */
    #define SJ_ROW_BODY(T, EXP2)                                                           \\
        T mx = -INFINITY, total = 0;                                                       \\
        for (int64_t j = 0; j < nv; j++) mx = row[j] > mx ? row[j] : mx;                      \\
        for (int64_t j = 0; j < nv; j++) { T e = EXP2(row[j] - mx); row[j] = e; total += e; } \\
        T inv = nv > 0 ? (T)1 / total : (T)0;                                              \\
        for (int64_t j = 0; j < nv; j++) row[j] *= inv;                                       \\
        for (int64_t j = nv; j < n; j++) row[j] = 0;
    static void sj_row_f(float* row, int64_t nv, int64_t n) { SJ_ROW_BODY(float, sj_exp2f) }
    static void sj_row_d(double* row, int64_t nv, int64_t n) { SJ_ROW_BODY(double, exp2) }
    """
    const char* sj_init_dispatch() nogil
    int sj_force_variant(const char* name) nogil
    void sj_tile_f(float* st, int64_t n, int64_t m, int64_t j0, const int64_t* nvis, int full,
                   float* mrow, float* lrow, float* cmax, float* alpha) noexcept nogil
    void sj_tile_d(double* st, int64_t n, int64_t m, int64_t j0, const int64_t* nvis, int full,
                   double* mrow, double* lrow, double* cmax, double* alpha) noexcept nogil
    void sj_row_f(float* row, int64_t nv, int64_t n) noexcept nogil
    void sj_row_d(double* row, int64_t nv, int64_t n) noexcept nogil
    # attention/fused.h
    int SJ_FA_QB
    Py_ssize_t sj_fa_scratch_floats(Py_ssize_t D, Py_ssize_t Dv) noexcept nogil
    void sj_fa_block(const float* q, const float* k, const float* v, float* o, int m, int D, int Dv,
                     int64_t lenb, int causal, int64_t first, float qscale, float* scratch) noexcept nogil

#: the vector ISA the float32 softmax tile code runs with here ("avx512f", "avx2" or "baseline")
SIMD = sj_init_dispatch().decode()


def _use_simd(name):
    """For tests: run the float32 tile code as variant ``name``; False if this CPU lacks it.
    (Not thread-safe against concurrent calls; restore with ``_use_simd(SIMD)``.)"""
    return bool(sj_force_variant(name.encode()))

ctypedef fused real:
    float
    double

_LOG2E = 1.0 / math.log(2.0)


cdef inline void _gemm(char* ta, char* tb, int M, int N, int K, real* A, int lda, real* B, int ldb,
                       real beta, real* C, int ldc) noexcept nogil:
    """Column-major C = op(A) op(B) + beta C (alpha = 1)."""
    cdef real one = 1
    if real is float:
        sgemm(ta, tb, &M, &N, &K, &one, A, &lda, B, &ldb, &beta, C, &ldc)
    else:
        dgemm(ta, tb, &M, &N, &K, &one, A, &lda, B, &ldb, &beta, C, &ldc)


cdef inline Py_ssize_t _visible(const int64_t* lengths, Py_ssize_t b, Py_ssize_t i, bint causal, Py_ssize_t offset) noexcept nogil:
    cdef Py_ssize_t nv = lengths[b]
    if causal and i + offset + 1 < nv:
        nv = i + offset + 1
    return nv if nv > 0 else 0


cdef void _block_task(real* q, real* k, real* v, const int64_t* lengths, bint causal, real qscale, real* out,
                      Py_ssize_t H, Py_ssize_t Lq, Py_ssize_t Lk, Py_ssize_t D, Py_ssize_t Dv, Py_ssize_t bq, Py_ssize_t bk, Py_ssize_t task,
                      real* qsT, real* st, real* mrow, int64_t* nvis) noexcept nogil:
    """One (batch, head, query block) work item; ``qsT``, ``st``, ``mrow`` (4 * bq), ``nvis`` are
    this thread's scratch."""
    cdef Py_ssize_t nqb = (Lq + bq - 1) // bq, offset = Lk - Lq
    cdef Py_ssize_t b = task // nqb // H, h = task // nqb % H, i0 = task % nqb * bq
    cdef Py_ssize_t m = Lq - i0 if Lq - i0 < bq else bq
    cdef Py_ssize_t r, d, n, j0 = 0, first, last
    cdef real *lrow = mrow + bq
    cdef real *cmax = mrow + 2 * bq
    cdef real *alpha = mrow + 3 * bq
    cdef real *o = out + ((b * H + h) * Lq + i0) * Dv
    cdef real *qt = q + ((b * H + h) * Lq + i0) * D
    cdef real *kh = k + (b * H + h) * Lk * D
    cdef real *vh = v + (b * H + h) * Lk * Dv
    cdef real a, zero = 0, one = 1
    for r in range(m * Dv):
        o[r] = 0
    last = _visible(lengths, b, i0 + m - 1, causal, offset)  # widest row of the block
    if last == 0:
        return
    first = _visible(lengths, b, i0, causal, offset)  # narrowest row
    for r in range(m):
        nvis[r] = _visible(lengths, b, i0 + r, causal, offset)
        mrow[r] = -INFINITY  # no key seen yet
        lrow[r] = 0
        for d in range(D):
            qsT[d * m + r] = qt[r * D + d] * qscale
    while j0 < last:
        n = last - j0 if last - j0 < bk else bk
        # st [n, m] (row-major) = K_blk [n, D] @ qsT [D, m]
        _gemm(b"N", b"N", m, n, D, qsT, m, kh + j0 * D, D, zero, st, m)
        if real is float:
            sj_tile_f(st, n, m, j0, nvis, j0 + n <= first, mrow, lrow, cmax, alpha)
        else:
            sj_tile_d(st, n, m, j0, nvis, j0 + n <= first, mrow, lrow, cmax, alpha)
        for r in range(m):
            a = alpha[r]
            if a != one:
                for d in range(Dv):
                    o[r * Dv + d] *= a
        # o [m, Dv] += st^T [m, n] @ V_blk [n, Dv]
        _gemm(b"N", b"T", Dv, m, n, vh + j0 * Dv, Dv, st, m, one, o, Dv)
        j0 += bk
    for r in range(m):
        a = 0 if lrow[r] == 0 else one / lrow[r]
        for d in range(Dv):
            o[r * Dv + d] *= a


cdef void _blocked(real* q, real* k, real* v, const int64_t* lengths, bint causal, real qscale, real* out,
                   Py_ssize_t B, Py_ssize_t H, Py_ssize_t Lq, Py_ssize_t Lk, Py_ssize_t D, Py_ssize_t Dv,
                   Py_ssize_t bq, Py_ssize_t bk, real* scratch, int64_t* iscratch, int threads) noexcept nogil:
    """``scratch`` holds ``(D + bk + 4) * bq`` reals and ``iscratch`` ``bq`` ints per thread."""
    cdef Py_ssize_t nqb = (Lq + bq - 1) // bq, task, per = (D + bk + 4) * bq
    cdef real *mine
    cdef int tid
    for task in prange(B * H * nqb, schedule="dynamic", num_threads=threads, nogil=True):
        tid = threadid()
        mine = scratch + tid * per
        _block_task(q, k, v, lengths, causal, qscale, out, H, Lq, Lk, D, Dv, bq, bk, task,
                    mine, mine + D * bq, mine + (D + bk) * bq, iscratch + tid * bq)


cdef void _with_weights(real* q, real* k, real* v, const int64_t* lengths, bint causal, real qscale, real* out,
                        real* weights, Py_ssize_t B, Py_ssize_t H, Py_ssize_t Lq, Py_ssize_t Lk, Py_ssize_t D,
                        Py_ssize_t Dv, Py_ssize_t bq, real* scratch, int threads) noexcept nogil:
    """The return_weights path: rows of the full score matrix, normalised in place, then out = W @ V.
    ``scratch`` holds ``bq * D`` reals per thread."""
    cdef Py_ssize_t nqb = (Lq + bq - 1) // bq, offset = Lk - Lq, task, b, h, i0, m, r
    cdef real *qs
    cdef real *w
    cdef real *qt
    cdef real zero = 0
    for task in prange(B * H * nqb, schedule="dynamic", num_threads=threads, nogil=True):
        qs = scratch + threadid() * bq * D
        b = task // nqb // H
        h = task // nqb % H
        i0 = task % nqb * bq
        m = Lq - i0 if Lq - i0 < bq else bq
        qt = q + ((b * H + h) * Lq + i0) * D
        for r in range(m * D):
            qs[r] = qt[r] * qscale
        w = weights + ((b * H + h) * Lq + i0) * Lk
        # w [m, Lk] = qs [m, D] @ K^T
        _gemm(b"T", b"N", Lk, m, D, k + (b * H + h) * Lk * D, D, qs, D, zero, w, Lk)
        for r in range(m):
            if real is float:
                sj_row_f(w + r * Lk, _visible(lengths, b, i0 + r, causal, offset), Lk)
            else:
                sj_row_d(w + r * Lk, _visible(lengths, b, i0 + r, causal, offset), Lk)
        if Dv > 0:  # out [m, Dv] = w [m, Lk] @ V [Lk, Dv]
            _gemm(b"N", b"N", Dv, m, Lk, v + (b * H + h) * Lk * Dv, Dv, w, Lk, zero,
                  out + ((b * H + h) * Lq + i0) * Dv, Dv)


cdef void _fused(const float* q, const float* k, const float* v, const int64_t* lengths, bint causal, float qscale,
                 float* out, Py_ssize_t B, Py_ssize_t H, Py_ssize_t Lq, Py_ssize_t Lk, Py_ssize_t D, Py_ssize_t Dv,
                 Py_ssize_t qb, float* scratch, int threads) noexcept nogil:
    """The fused kernel (attention/fused.h) over every (batch, head, block of ``qb`` <= SJ_FA_QB
    queries); ``scratch`` holds ``sj_fa_scratch_floats(D, Dv)`` floats per thread."""
    cdef Py_ssize_t nqb = (Lq + qb - 1) // qb, per = sj_fa_scratch_floats(D, Dv)
    cdef Py_ssize_t task, b, bh, i0
    for task in prange(B * H * nqb, schedule="dynamic", num_threads=threads, nogil=True):
        bh = task // nqb
        b = bh // H
        i0 = task % nqb * qb
        sj_fa_block(q + (bh * Lq + i0) * D, k + bh * Lk * D, v + bh * Lk * Dv, out + (bh * Lq + i0) * Dv,
                    <int>(Lq - i0 if Lq - i0 < qb else qb), <int>D, <int>Dv, lengths[b], causal,
                    i0 + Lk - Lq, qscale, scratch + threadid() * per)


def _run_fused(float[:, :, :, ::1] q, float[:, :, :, ::1] k, float[:, :, :, ::1] v, const int64_t[::1] lengths,
               bint causal, double scale, float[:, :, :, ::1] out, int threads):
    """The fused kernel on checked float32 arrays with B, H, Lq, Lk, D, Dv all >= 1."""
    cdef Py_ssize_t B = q.shape[0], H = q.shape[1], Lq = q.shape[2], D = q.shape[3]
    cdef Py_ssize_t Lk = k.shape[2], Dv = v.shape[3]
    cdef float qscale = <float>(scale * _LOG2E)
    cdef float[::1] scratch = np.empty(threads * sj_fa_scratch_floats(D, Dv), np.float32)
    cdef Py_ssize_t qb = SJ_FA_QB
    # the largest work item (fewest key packings) that still leaves two per thread
    while qb > 48 and B * H * ((Lq + qb - 1) // qb) < 2 * threads:
        qb //= 2
    with nogil:
        _fused(&q[0, 0, 0, 0], &k[0, 0, 0, 0], &v[0, 0, 0, 0], &lengths[0], causal, qscale,
               &out[0, 0, 0, 0], B, H, Lq, Lk, D, Dv, qb, &scratch[0], threads)


def _run(real[:, :, :, ::1] q, real[:, :, :, ::1] k, real[:, :, :, ::1] v, const int64_t[::1] lengths,
         bint causal, double scale, real[:, :, :, ::1] out, weights, Py_ssize_t bq, Py_ssize_t bk, int threads):
    """Run the kernel on checked, non-empty arrays (``out`` may have Dv = 0 only with ``weights``)."""
    cdef Py_ssize_t B = q.shape[0], H = q.shape[1], Lq = q.shape[2], D = q.shape[3]
    cdef Py_ssize_t Lk = k.shape[2], Dv = v.shape[3]
    cdef real qscale = <real>(scale * _LOG2E)
    cdef real[:, :, :, ::1] w
    cdef real[::1] scratch
    cdef int64_t[::1] iscratch
    cdef real *vp = &v[0, 0, 0, 0] if Dv > 0 else NULL
    cdef real *op = &out[0, 0, 0, 0] if Dv > 0 else NULL
    dtype = np.float32 if real is float else np.float64
    if weights is None:
        scratch = np.empty(threads * (D + bk + 4) * bq, dtype)
        iscratch = np.empty(threads * bq, np.int64)
        with nogil:
            _blocked(&q[0, 0, 0, 0], &k[0, 0, 0, 0], vp, &lengths[0], causal, qscale, op,
                     B, H, Lq, Lk, D, Dv, bq, bk, &scratch[0], &iscratch[0], threads)
    else:
        w = weights
        scratch = np.empty(threads * bq * D, dtype)
        with nogil:
            _with_weights(&q[0, 0, 0, 0], &k[0, 0, 0, 0], vp, &lengths[0], causal, qscale, op,
                          &w[0, 0, 0, 0], B, H, Lq, Lk, D, Dv, bq, &scratch[0], threads)


#: float32 calls without weights of at least this many queries run the fused kernel (attention/fused.h),
#: others the blocked BLAS one. A decode step (one query) stays there: the fused kernel's tiles of 6-12
#: query rows would compute 1, and at B16 H8 Lk10 it ran 0.6-0.8x the blocked kernel (2 cores, loaded)
FUSED_MIN_QUERIES = 2
#: below this many multiply-adds (B*H*Lq*Lk*(D+Dv)) a call runs on the calling thread alone
SERIAL_MACS = 1 << 20


def attention(q, k, v, *, causal=False, lengths=None, scale=None, return_weights=False, out=None):
    """Blocked attention; see :mod:`seqjit.kernels.attention.spec` for arguments and shapes."""
    p = spec.prepare(q, k, v, causal=causal, lengths=lengths, scale=scale, return_weights=return_weights, out=out)
    B, H, Lq, Lk, D, Dv = p.shape
    if B == 0 or H == 0 or Lq == 0:
        return p.result()
    if Lk == 0 or Dv == 0:
        p.out[...] = 0
        if p.return_weights:
            p.weights[...] = 0
        if Lk == 0 or not p.return_weights:
            return p.result()
    if p.q.dtype == np.float32 and not p.return_weights and Lq >= FUSED_MIN_QUERIES and Lk > 0 and Dv > 0:
        threads = 1 if B * H * Lq * Lk * (D + Dv) < SERIAL_MACS else get_num_threads()
        _run_fused(p.q, p.k, p.v, p.lengths, p.causal, p.scale, p.out, threads)
        return p.result()
    bq, bk = tile_sizes(Lq, Lk, D, Dv)  # see _blas.py
    if B * H * Lq * Lk * (D + Dv) < SERIAL_MACS:
        # e.g. a decode step's attention (one query, up to a few hundred keys): waking the other
        # threads and limiting BLAS cost more than they save (below SERIAL_MACS, measured); tile
        # GEMMs this small stay single-threaded in BLAS
        _run(p.q, p.k, p.v, p.lengths, p.causal, p.scale, p.out, p.weights, bq, bk, 1)
        return p.result()
    with single_threaded_blas():
        _run(p.q, p.k, p.v, p.lengths, p.causal, p.scale, p.out, p.weights, bq, bk, get_num_threads())
    return p.result()
