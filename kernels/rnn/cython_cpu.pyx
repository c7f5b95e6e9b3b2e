# cython: language_level=3
"""Cython CPU gru / lstm / gru_cell / lstm_cell.

Per layer and direction one call (:func:`_layer`) runs inside ONE OpenMP parallel region: each thread
computes its tiles of the input projection of every step (then one barrier), then runs the whole time
loop on a fixed range of hidden-unit blocks (the same rows of W_hh every step, walked backwards on odd
steps so the rows used last, still in its L2, come first): per step it computes those rows of
``h @ W_hh.T``, applies the fused gate math to its units, and meets the other threads at one barrier.
Both GEMMs use a 4x4 register-blocked dot-product kernel (no BLAS: one thread pool). The two inner
kernels are small C functions (``omp simd`` loops, compiled for AVX-512/AVX2/baseline on GCC/x86-64
and picked at the first call by CPU features capped by $SEQJIT_ISA: :func:`isa`): Cython cannot express vectorised float reductions without fast-math.
float32 uses a rational tanh approximation (max 4.4 ulp, see ``_nbmath.py``); float64 uses libm.

Large float32 calls (``_driver.use_panels``: batch >= 2 and enough row-steps) take the panel path
instead (:func:`_run_panels`): each thread packs its 32-unit panels of W_ih and W_hh, then per step
computes both projections for its units with an outer-product kernel whose accumulators stay in
registers (8 rows x 2 zmm with AVX-512, 3 rows x 4 ymm otherwise; ~56.5 GMAC/s per Zen 4 core inside a
batch-32 LSTM layer, 98% of the 57.7 measured for bare FMAs, against ~45 for the dot-product kernel)
and applies the gate math. Threads meet once per step at a split-phase spin barrier, with the next
step's input projection between signalling and waiting.
"""
import numpy as np

from libc.stdint cimport int64_t
from cython.parallel cimport parallel

from seqjit.kernels._aligned import aligned_empty

from . import _driver, spec

cdef extern from *:
    """
    /* Each kernel below is compiled once per instruction set (SJ_TGT_base/avx2/avx512, name suffix
       _base/_avx2/_avx512) and SJ_PICK calls the one for the level of _runtime/isa_cap.h (the CPU's
       best under $SEQJIT_ISA); compilers other than GCC >= 12 on x86-64 build the baseline only. */
    #include "_runtime/isa_cap.h"
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 12
    #define SJ_MULTI_ISA 1
    #define SJ_TGT_base
    #define SJ_TGT_avx2 __attribute__((target("arch=x86-64-v3")))
    #define SJ_TGT_avx512 __attribute__((target("arch=x86-64-v4")))
    #define SJ_PICK(fn, ...) do { int l_ = sj_isa_level(); \
        if (l_ == SJ_ISA_AVX512) fn##_avx512(__VA_ARGS__); else if (l_ == SJ_ISA_AVX2) fn##_avx2(__VA_ARGS__); \
        else fn##_base(__VA_ARGS__); } while (0)
    static const char *sj_rnn_isa(void) { return sj_isa_name(sj_isa_level()); }
    #else
    #define SJ_TGT_base
    #define SJ_PICK(fn, ...) fn##_base(__VA_ARGS__)
    static const char *sj_rnn_isa(void) { return "baseline"; }
    #endif
    #ifdef _OPENMP
    #include <omp.h>
    #define SJ_PRAGMA(x) _Pragma(#x)
    static inline int sj_thread_num(void) { return omp_get_thread_num(); }
    static inline int sj_num_threads(void) { return omp_get_num_threads(); }
    static inline void sj_barrier(void) {
        #pragma omp barrier
    }
    #else
    #define SJ_PRAGMA(x)
    static inline int sj_thread_num(void) { return 0; }
    static inline int sj_num_threads(void) { return 1; }
    static inline void sj_barrier(void) {}
    #endif

    #include "../_sj_tanhf.h"  /* sj_tanhf: Eigen's rational float32 tanh */

    /* hh[i*ldhh + q] = dot(w[q*K:], h[i*ldh:]) for q < 4 and i < nb: 4 weight rows x 4 state rows
       per pass, so each weight element is loaded once per 4 state rows. */
    #define SJ_DEFINE_ROWS(T, SUF, ISA) \\
    SJ_TGT_##ISA static void sj_rows4_##SUF##_##ISA(const T *w, long K, const T *h, long ldh, long nb, T *hh, \\
                                                    long ldhh) { \\
        const T *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K; \\
        long i = 0; \\
        for (; i + 4 <= nb; i += 4) { \\
            const T *h0 = h + i * ldh, *h1 = h0 + ldh, *h2 = h1 + ldh, *h3 = h2 + ldh; \\
            T a00 = 0, a01 = 0, a02 = 0, a03 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0; \\
            T a20 = 0, a21 = 0, a22 = 0, a23 = 0, a30 = 0, a31 = 0, a32 = 0, a33 = 0; \\
            SJ_PRAGMA(omp simd reduction(+:a00,a01,a02,a03,a10,a11,a12,a13,a20,a21,a22,a23,a30,a31,a32,a33)) \\
            for (long k = 0; k < K; k++) { \\
                T x0 = h0[k], x1 = h1[k], x2 = h2[k], x3 = h3[k]; \\
                a00 += w0[k] * x0; a01 += w0[k] * x1; a02 += w0[k] * x2; a03 += w0[k] * x3; \\
                a10 += w1[k] * x0; a11 += w1[k] * x1; a12 += w1[k] * x2; a13 += w1[k] * x3; \\
                a20 += w2[k] * x0; a21 += w2[k] * x1; a22 += w2[k] * x2; a23 += w2[k] * x3; \\
                a30 += w3[k] * x0; a31 += w3[k] * x1; a32 += w3[k] * x2; a33 += w3[k] * x3; \\
            } \\
            T *o = hh + i * ldhh; \\
            o[0] = a00; o[1] = a10; o[2] = a20; o[3] = a30; o += ldhh; \\
            o[0] = a01; o[1] = a11; o[2] = a21; o[3] = a31; o += ldhh; \\
            o[0] = a02; o[1] = a12; o[2] = a22; o[3] = a32; o += ldhh; \\
            o[0] = a03; o[1] = a13; o[2] = a23; o[3] = a33; \\
        } \\
        for (; i < nb; i++) { \\
            const T *h0 = h + i * ldh; \\
            T a0 = 0, a1 = 0, a2 = 0, a3 = 0; \\
            SJ_PRAGMA(omp simd reduction(+:a0,a1,a2,a3)) \\
            for (long k = 0; k < K; k++) { \\
                T x = h0[k]; \\
                a0 += w0[k] * x; a1 += w1[k] * x; a2 += w2[k] * x; a3 += w3[k] * x; \\
            } \\
            T *o = hh + i * ldhh; \\
            o[0] = a0; o[1] = a1; o[2] = a2; o[3] = a3; \\
        } \\
    } \\
    SJ_TGT_##ISA static void sj_row1_##SUF##_##ISA(const T *w, long K, const T *h, long ldh, long nb, T *hh, \\
                                                   long ldhh) { \\
        for (long i = 0; i < nb; i++) { \\
            const T *h0 = h + i * ldh; \\
            T a = 0; \\
            SJ_PRAGMA(omp simd reduction(+:a)) \\
            for (long k = 0; k < K; k++) a += w[k] * h0[k]; \\
            hh[i * ldhh] = a; \\
        } \\
    }
    #define SJ_DISPATCH_ROWS(T, SUF) \\
    static void sj_rows4_##SUF(const T *w, long K, const T *h, long ldh, long nb, T *hh, long ldhh) { \\
        SJ_PICK(sj_rows4_##SUF, w, K, h, ldh, nb, hh, ldhh); \\
    } \\
    static void sj_row1_##SUF(const T *w, long K, const T *h, long ldh, long nb, T *hh, long ldhh) { \\
        SJ_PICK(sj_row1_##SUF, w, K, h, ldh, nb, hh, ldhh); \\
    }

    /* Fused gate math for units j0 <= j < j1 of one state row: xg/hg are that row's input and hidden
       projections [G*H], b the summed biases [G*H] (b_ih + b_hh; the GRU's n gate: b_in only) and bhn
       the GRU's b_hn [H]; writes the new state to h_new and o (the output). */
    #define SJ_DEFINE_SIGMOID(T, SUF, TANH) \
    static inline T sj_sigmoid_##SUF(T x) { return (T)0.5 + (T)0.5 * TANH((T)0.5 * x); }
    SJ_DEFINE_SIGMOID(float, f, sj_tanhf)
    SJ_DEFINE_SIGMOID(double, d, tanh)
    #define SJ_DEFINE_GATES(T, SUF, TANH, ISA) \
    SJ_TGT_##ISA static void sj_gru_units_##SUF##_##ISA(const T *xg, const T *hg, const T *b, const T *bhn, \
                                                        const T *h, T *h_new, T *o, long H, long j0, long j1) { \
        SJ_PRAGMA(omp simd) \
        for (long j = j0; j < j1; j++) { \
            T r = sj_sigmoid_##SUF(xg[j] + hg[j] + b[j]); \
            T z = sj_sigmoid_##SUF(xg[H + j] + hg[H + j] + b[H + j]); \
            T n = TANH(xg[2 * H + j] + b[2 * H + j] + r * (hg[2 * H + j] + bhn[j])); \
            T v = n + z * (h[j] - n); \
            h_new[j] = v; \
            o[j] = v; \
        } \
    } \
    SJ_TGT_##ISA static void sj_lstm_units_##SUF##_##ISA(const T *xg, const T *hg, const T *b, T *c, \
                                                         T *h_new, T *o, long H, long j0, long j1) { \
        SJ_PRAGMA(omp simd) \
        for (long j = j0; j < j1; j++) { \
            T i = sj_sigmoid_##SUF(xg[j] + hg[j] + b[j]); \
            T f = sj_sigmoid_##SUF(xg[H + j] + hg[H + j] + b[H + j]); \
            T g = TANH(xg[2 * H + j] + hg[2 * H + j] + b[2 * H + j]); \
            T og = sj_sigmoid_##SUF(xg[3 * H + j] + hg[3 * H + j] + b[3 * H + j]); \
            T cv = f * c[j] + i * g; \
            c[j] = cv; \
            T v = og * TANH(cv); \
            h_new[j] = v; \
            o[j] = v; \
        } \
    }
    #define SJ_DISPATCH_GATES(T, SUF) \
    static void sj_gru_units_##SUF(const T *xg, const T *hg, const T *b, const T *bhn, const T *h, \
                                   T *h_new, T *o, long H, long j0, long j1) { \
        SJ_PICK(sj_gru_units_##SUF, xg, hg, b, bhn, h, h_new, o, H, j0, j1); \
    } \
    static void sj_lstm_units_##SUF(const T *xg, const T *hg, const T *b, T *c, T *h_new, T *o, long H, \
                                    long j0, long j1) { \
        SJ_PICK(sj_lstm_units_##SUF, xg, hg, b, c, h_new, o, H, j0, j1); \
    }
    #define SJ_DEFINE_KERNELS(ISA) \
        SJ_DEFINE_ROWS(float, f, ISA) SJ_DEFINE_ROWS(double, d, ISA) \
        SJ_DEFINE_GATES(float, f, sj_tanhf, ISA) SJ_DEFINE_GATES(double, d, tanh, ISA)
    SJ_DEFINE_KERNELS(base)
    #ifdef SJ_MULTI_ISA
    SJ_DEFINE_KERNELS(avx2)
    SJ_DEFINE_KERNELS(avx512)
    #endif
    SJ_DISPATCH_ROWS(float, f)
    SJ_DISPATCH_ROWS(double, d)
    SJ_DISPATCH_GATES(float, f)
    SJ_DISPATCH_GATES(double, d)


    /* Panel GEMM (float32, the large-batch path): a weight matrix W [G*H, K] is packed once per call
       into panels of 32 hidden units of one gate, panel p = u*G + g holding wp[p][k][c] =
       W[g*H + 32u + c, k] (zero past H), so a step's GEMM is an outer-product kernel: per k, 4
       8-float vectors of the panel times 3 broadcast state values into 12 vector accumulators (no
       horizontal sums; any x86-64; with AVX-512 the 8-row variant below is used). */
    #if defined(__GNUC__) || defined(__clang__)
    typedef float sj_v8 __attribute__((vector_size(32)));
    typedef float sj_v8u __attribute__((vector_size(32), aligned(4)));
    #define SJ_NR 32
    /* SJ_PF(PF, k): with PF, fetch row k of the next panel (pf, 128 bytes) into L2 while this one is
       computed, so the next panel's first block of state rows does not wait on L3 (a stand-alone loop
       over 128 panels: 53-56 -> 55-57 GMAC/s on Zen 4; within noise in a whole layer call) */
    #define SJ_PF(PF, k) if (PF) { __builtin_prefetch(pf + (k) * SJ_NR, 0, 2); \
                                   __builtin_prefetch(pf + (k) * SJ_NR + 16, 0, 2); }
    #define SJ_PANEL_BLOCK(MR, PF) { \
        const float *r[MR]; \
        sj_v8 c[MR][4]; \
        for (int i = 0; i < MR; i++) { \
            r[i] = h + roff[i]; \
            for (int v = 0; v < 4; v++) c[i][v] = (sj_v8){0}; \
        } \
        for (long k = 0; k < K; k++) { \
            const float *wk = wp + k * SJ_NR; \
            sj_v8 b0 = *(const sj_v8u *)wk, b1 = *(const sj_v8u *)(wk + 8); \
            sj_v8 b2 = *(const sj_v8u *)(wk + 16), b3 = *(const sj_v8u *)(wk + 24); \
            SJ_PF(PF, k) \
            for (int i = 0; i < MR; i++) { \
                float a = r[i][k]; \
                c[i][0] += a * b0; c[i][1] += a * b1; c[i][2] += a * b2; c[i][3] += a * b3; \
            } \
        } \
        if (nc == SJ_NR) { \
            for (int i = 0; i < MR; i++) for (int v = 0; v < 4; v++) *(sj_v8u *)(out + i * ldo + 8 * v) = c[i][v]; \
        } else { \
            float tmp[SJ_NR]; \
            for (int i = 0; i < MR; i++) { \
                for (int v = 0; v < 4; v++) *(sj_v8u *)(tmp + 8 * v) = c[i][v]; \
                for (long j = 0; j < nc; j++) out[i * ldo + j] = tmp[j]; \
            } \
        } }
    #define SJ_PANEL_CASE(MR) case MR: SJ_PANEL_BLOCK(MR, 0) break;
    /* out[i*ldo + c] = sum_k h[roff[i] + k] * wp[k*32 + c] for i < nb, c < nc (<= 32): row i of the
       left operand starts at h + roff[i]. pf: the panel to be used next (prefetched), or NULL. */
    /* The body of a panel function: blocks of MR rows (BLOCK), the first one prefetching the next
       panel when there is one, then the rest by a switch over the CASES of the last block's size. */
    #define SJ_PANEL_ROWS(MR, BLOCK, CASES) \
        if (pf != NULL && nb >= MR) {  /* the first block of rows streams the panel: prefetch the next */ \
            BLOCK(MR, 1) \
            roff += MR; \
            out += MR * ldo; \
            nb -= MR; \
        } \
        for (long i = 0; i < nb; i += MR) { \
            switch (nb - i < MR ? nb - i : MR) { CASES } \
            roff += MR; \
            out += MR * ldo; \
        }
    #define SJ_DEFINE_PANEL8(ISA) \\
    SJ_TGT_##ISA static void sj_panel8_f_##ISA(const float *wp, const float *h, const int64_t *roff, long K, \\
                                               long nb, float *out, long ldo, long nc, const float *pf) { \\
        SJ_PANEL_ROWS(3, SJ_PANEL_BLOCK, SJ_PANEL_CASE(3) SJ_PANEL_CASE(2) SJ_PANEL_CASE(1)) \\
    }
    SJ_DEFINE_PANEL8(base)
    #ifdef SJ_MULTI_ISA
    SJ_DEFINE_PANEL8(avx2)
    /* AVX-512: 2 16-float vectors per panel row, 8 state rows per pass (16 accumulators of the 32
       zmm registers), so each panel vector loaded serves 8 rows instead of 3. */
    typedef float sj_v16 __attribute__((vector_size(64)));
    typedef float sj_v16u __attribute__((vector_size(64), aligned(4)));
    #define SJ_PANEL16_BLOCK(MR, PF) { \
        const float *r[MR]; \
        sj_v16 c0[MR], c1[MR]; \
        for (int i = 0; i < MR; i++) { r[i] = h + roff[i]; c0[i] = (sj_v16){0}; c1[i] = (sj_v16){0}; } \
        for (long k = 0; k < K; k++) { \
            sj_v16 b0 = *(const sj_v16u *)(wp + k * SJ_NR), b1 = *(const sj_v16u *)(wp + k * SJ_NR + 16); \
            SJ_PF(PF, k) \
            for (int i = 0; i < MR; i++) { float a = r[i][k]; c0[i] += a * b0; c1[i] += a * b1; } \
        } \
        if (nc == SJ_NR) { \
            for (int i = 0; i < MR; i++) { \
                *(sj_v16u *)(out + i * ldo) = c0[i]; *(sj_v16u *)(out + i * ldo + 16) = c1[i]; \
            } \
        } else { \
            float tmp[SJ_NR]; \
            for (int i = 0; i < MR; i++) { \
                *(sj_v16u *)tmp = c0[i]; *(sj_v16u *)(tmp + 16) = c1[i]; \
                for (long j = 0; j < nc; j++) out[i * ldo + j] = tmp[j]; \
            } \
        } }
    #define SJ_PANEL16_CASE(MR) case MR: SJ_PANEL16_BLOCK(MR, 0) break;
    __attribute__((target("arch=x86-64-v4"))) static void sj_panel16_f(
            const float *wp, const float *h, const int64_t *roff, long K, long nb, float *out, long ldo, long nc,
            const float *pf) {
        SJ_PANEL_ROWS(8, SJ_PANEL16_BLOCK, SJ_PANEL16_CASE(8) SJ_PANEL16_CASE(7) SJ_PANEL16_CASE(6)
                      SJ_PANEL16_CASE(5) SJ_PANEL16_CASE(4) SJ_PANEL16_CASE(3) SJ_PANEL16_CASE(2) SJ_PANEL16_CASE(1))
    }
    /* AVX-512: the 8-row kernel; AVX2 and the baseline: the 3-row one, compiled for each */
    static void sj_panel_f(const float *wp, const float *h, const int64_t *roff, long K, long nb, float *out,
                           long ldo, long nc, const float *pf) {
        int level = sj_isa_level();
        if (level == SJ_ISA_AVX512) sj_panel16_f(wp, h, roff, K, nb, out, ldo, nc, pf);
        else if (level == SJ_ISA_AVX2) sj_panel8_f_avx2(wp, h, roff, K, nb, out, ldo, nc, pf);
        else sj_panel8_f_base(wp, h, roff, K, nb, out, ldo, nc, pf);
    }
    #else
    #define sj_panel_f sj_panel8_f_base
    #endif
    #else  /* no GNU vector extensions: a plain loop nest (correct, not fast) */
    #define SJ_NR 32
    static void sj_panel_f(const float *wp, const float *h, const int64_t *roff, long K, long nb, float *out,
                           long ldo, long nc, const float *pf) {
        (void)pf;
        for (long i = 0; i < nb; i++)
            for (long j = 0; j < nc; j++) {
                float a = 0;
                for (long k = 0; k < K; k++) a += h[roff[i] + k] * wp[k * SJ_NR + j];
                out[i * ldo + j] = a;
            }
    }
    #endif
    /* Panels p0 <= p < p1 of W [G*H, K] (layout above). */
    static void sj_pack_f(const float *w, long H, long G, long K, float *wp, long p0, long p1) {
        for (long p = p0; p < p1; p++) {
            long u = p / G, g = p % G, nc = H - u * SJ_NR < SJ_NR ? H - u * SJ_NR : SJ_NR;
            const float *src = w + (g * H + u * SJ_NR) * K;
            float *dst = wp + p * K * SJ_NR;
            /* 16 k at a time: the 2 KB of the panel being written stays in L1 while the 32 source rows
               are read once each (a whole-K pass per column rewrote each line 32 times from L2) */
            for (long k0 = 0; k0 < K; k0 += 16) {
                long k1 = k0 + 16 < K ? k0 + 16 : K;
                for (long c = 0; c < SJ_NR; c++)
                    for (long k = k0; k < k1; k++) dst[k * SJ_NR + c] = c < nc ? src[c * K + k] : 0.0f;
            }
        }
    }

    /* A split-phase barrier: a thread signals when its units of the step's state are written, may do
       work that does not need the other threads' units (the panel path: the next step's input
       projection), and only then waits for all signals of the step. The counter counts signals over
       the whole call. A waiter spins with pause for a while (about what waking a sleeping thread
       costs, short of a step), then yields the core between checks: with another process busy on a
       core this keeps up with the OpenMP barrier, where sleeping between checks did not. */
    #if defined(__GNUC__) || defined(__clang__)
    #include <sched.h>
    static inline void sj_signal(int64_t *ctr) { __atomic_add_fetch(ctr, 1, __ATOMIC_ACQ_REL); }
    static inline void sj_wait(int64_t *ctr, int64_t target) {
        long spins = 0;
        while (__atomic_load_n(ctr, __ATOMIC_ACQUIRE) < target) {
            if (++spins < 4000) {
    #if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
    #endif
            } else {
                sched_yield();
            }
        }
    }
    #else  /* no atomics: every wait is a full barrier (signals are no-ops); still correct */
    static inline void sj_signal(int64_t *ctr) { (void)ctr; }
    static inline void sj_wait(int64_t *ctr, int64_t target) { (void)ctr; (void)target; sj_barrier(); }
    #endif
    """
    int sj_thread_num() noexcept nogil
    int sj_num_threads() noexcept nogil
    void sj_barrier() noexcept nogil
    float sj_tanhf(float x) noexcept nogil
    void sj_rows4_f(const float *w, long K, const float *h, long ldh, long nb, float *hh, long ldhh) noexcept nogil
    void sj_row1_f(const float *w, long K, const float *h, long ldh, long nb, float *hh, long ldhh) noexcept nogil
    void sj_rows4_d(const double *w, long K, const double *h, long ldh, long nb, double *hh, long ldhh) noexcept nogil
    void sj_row1_d(const double *w, long K, const double *h, long ldh, long nb, double *hh, long ldhh) noexcept nogil
    void sj_gru_units_f(const float *xg, const float *hg, const float *b, const float *bhn, const float *h,
                        float *h_new, float *o, long H, long j0, long j1) noexcept nogil
    void sj_gru_units_d(const double *xg, const double *hg, const double *b, const double *bhn, const double *h,
                        double *h_new, double *o, long H, long j0, long j1) noexcept nogil
    void sj_lstm_units_f(const float *xg, const float *hg, const float *b, float *c,
                         float *h_new, float *o, long H, long j0, long j1) noexcept nogil
    void sj_lstm_units_d(const double *xg, const double *hg, const double *b, double *c,
                         double *h_new, double *o, long H, long j0, long j1) noexcept nogil
    void sj_panel_f(const float *wp, const float *h, const int64_t *roff, long K, long nb, float *out, long ldo,
                    long nc, const float *pf) noexcept nogil
    void sj_pack_f(const float *w, long H, long G, long K, float *wp, long p0, long p1) noexcept nogil
    void sj_signal(int64_t *ctr) noexcept nogil
    void sj_wait(int64_t *ctr, int64_t target) noexcept nogil
    const char* sj_rnn_isa() noexcept nogil

ctypedef fused real:
    float
    double

cdef enum:
    UNITS = 64  # hidden units (and weight rows of the input projection) per work block
    TILE_ROWS = 128  # input rows per tile of the input projection
    NR = 32  # hidden units per panel (the panel path)


cdef inline void _rows(const real *w, long K, const real *h, long nb, real *hh, long ldhh, long nrows) noexcept nogil:
    """``hh[i, q] = w[q] . h[i]`` for q < nrows (rows of length K, state rows of stride K)."""
    cdef long q = 0
    while q + 4 <= nrows:
        if real is float:
            sj_rows4_f(w + q * K, K, h, K, nb, hh + q, ldhh)
        else:
            sj_rows4_d(w + q * K, K, h, K, nb, hh + q, ldhh)
        q += 4
    while q < nrows:
        if real is float:
            sj_row1_f(w + q * K, K, h, K, nb, hh + q, ldhh)
        else:
            sj_row1_d(w + q * K, K, h, K, nb, hh + q, ldhh)
        q += 1


cdef inline void _gru_units(const real *xg, const real *hg, const real *b, const real *bhn, const real *h,
                            real *h_new, real *o, long H, long j0, long j1) noexcept nogil:
    if real is float:
        sj_gru_units_f(xg, hg, b, bhn, h, h_new, o, H, j0, j1)
    else:
        sj_gru_units_d(xg, hg, b, bhn, h, h_new, o, H, j0, j1)


cdef inline void _lstm_units(const real *xg, const real *hg, const real *b, real *c,
                             real *h_new, real *o, long H, long j0, long j1) noexcept nogil:
    if real is float:
        sj_lstm_units_f(xg, hg, b, c, h_new, o, H, j0, j1)
    else:
        sj_lstm_units_d(xg, hg, b, c, h_new, o, H, j0, j1)


cdef void _project(const real *x, const real *w, real *xp, long M, long N, long K, int tid, int nth) noexcept nogil:
    """This thread's tiles (UNITS weight rows x TILE_ROWS input rows) of ``xp[M, N] = x[M, K] @ w[N, K].T``."""
    cdef long ntn = (N + UNITS - 1) // UNITS, ntm = (M + TILE_ROWS - 1) // TILE_ROWS, tile = tid, n0, m0
    while tile < ntn * ntm:
        n0 = (tile % ntn) * UNITS
        m0 = (tile // ntn) * TILE_ROWS
        _rows(w + n0 * K, K, x + m0 * K, min(M, m0 + TILE_ROWS) - m0, xp + m0 * N + n0, N, min(N, n0 + UNITS) - n0)
        tile += nth


cdef void _steps(const real *xp, const real *w_hh, const real *b, const real *bhn, real *hs, real *cs, real *hh,
                 int64_t *done, const int64_t *lens, const int64_t *order, long B, long H, long G, long nsteps, bint reverse,
                 bint lstm, real *out, long ldo, long col, int tid, int nth) noexcept nogil:
    """The time loop, run by every thread of the parallel region on its own blocks of hidden units."""
    cdef long nblocks = (H + UNITS - 1) // UNITS
    cdef long blk0 = nblocks * tid // nth, blk1 = nblocks * (tid + 1) // nth
    cdef long GH = G * H, nact = B, s, q, blk, j0, j1, g, i, row, t
    cdef real *hsrc
    cdef real *hdst
    for s in range(nsteps):
        while nact > 0 and lens[nact - 1] <= s:
            nact -= 1
        hsrc = hs + (s % 2) * B * H
        hdst = hs + (1 - s % 2) * B * H
        for q in range(blk1 - blk0):
            # zig-zag: odd steps walk the blocks backwards, so the W_hh rows used last (still in this
            # core's L2) are the first ones needed again
            blk = blk0 + q if s % 2 == 0 else blk1 - 1 - q
            j0 = blk * UNITS
            j1 = min(H, j0 + UNITS)
            for g in range(G):
                _rows(w_hh + (g * H + j0) * H, H, hsrc, nact, hh + g * H + j0, GH, j1 - j0)
            for i in range(nact):
                row = order[i]
                t = lens[i] - 1 - s if reverse else s
                if lstm:
                    _lstm_units(xp + (t * B + row) * GH, hh + i * GH, b, cs + i * H, hdst + i * H,
                                out + (t * B + row) * ldo + col, H, j0, j1)
                else:
                    _gru_units(xp + (t * B + row) * GH, hh + i * GH, b, bhn, hsrc + i * H, hdst + i * H,
                               out + (t * B + row) * ldo + col, H, j0, j1)
        sj_signal(done)  # a spin barrier: a step is ~10-100 us, a sleeping thread's wake-up costs that much
        sj_wait(done, nth * (s + 1))


cdef void _run(const real *x, const real *w_ih, real *xp, long M, long K, const real *w_hh, const real *b,
               const real *bhn, real *hs, real *cs, real *hh, int64_t *done, const int64_t *lens, const int64_t *order, long B,
               long H, long G, long nsteps, bint reverse, bint lstm, real *out, long ldo, long col) noexcept nogil:
    """Everything one thread of the parallel region does: its share of the input projection, then the
    time loop on its own hidden units."""
    cdef int tid = sj_thread_num(), nth = sj_num_threads()
    _project(x, w_ih, xp, M, G * H, K, tid, nth)
    sj_barrier()
    _steps(xp, w_hh, b, bhn, hs, cs, hh, done, lens, order, B, H, G, nsteps, reverse, lstm, out, ldo, col, tid, nth)


cdef inline long _running(const int64_t *lens, long nact, long s) noexcept nogil:
    """How many rows (sorted longest first) are still running at step ``s``, from the count at an
    earlier step."""
    while nact > 0 and lens[nact - 1] <= s:
        nact -= 1
    return nact


cdef void _project_step(const float *x, const float *wp_ih, float *xs, int64_t *rx, const int64_t *lens,
                        const int64_t *order, long nact, long s, bint reverse, long B, long K, long H, long G,
                        long u0, long u1) noexcept nogil:
    """This thread's panels (units ``u0 <= u < u1``) of step ``s``'s input projection of the ``nact``
    running rows, into ``xs`` (row i = running row i)."""
    cdef long i, t, p, j0
    for i in range(nact):
        t = lens[i] - 1 - s if reverse else s
        rx[i] = (t * B + order[i]) * K
    for p in range(u0 * G, u1 * G):  # panel p = u*G + g: units from j0 = 32u, gate g
        j0 = (p // G) * NR
        sj_panel_f(wp_ih + p * K * NR, x, rx, K, nact, xs + (p % G) * H + j0, G * H, min(H, j0 + NR) - j0,
                   wp_ih + (p + 1) * K * NR if p + 1 < u1 * G else NULL)


cdef void _run_panels(const float *x, const float *w_ih, float *wp_ih, long K, const float *w_hh, float *wp_hh,
                      const float *b, const float *bhn, float *hs, float *cs, float *xs, float *hh, int64_t *roffs,
                      int64_t *done, const int64_t *lens, const int64_t *order, long B, long H, long G, long nsteps,
                      bint reverse, bint lstm, float *out, long ldo, long col) noexcept nogil:
    """The large-batch float32 path, run by every thread of the parallel region on its own 32-unit
    panels: pack those panels of W_ih and W_hh, then per step compute their columns of the step's
    hidden projection ``h @ W_hh.T`` with the outer-product panel kernel and apply the fused gate math
    to their units. The input projection ``x_t @ W_ih.T`` of those columns is computed a step ahead,
    between signalling that the step's units are written and waiting for the other threads' (a
    split-phase barrier on the counter ``done``, zero on entry): it does not need their units, so a
    late thread or a slow wake-up is hidden behind half of the step's work."""
    cdef int tid = sj_thread_num(), nth = sj_num_threads()
    cdef long npu = (H + NR - 1) // NR, GH = G * H
    cdef long u0 = npu * tid // nth, u1 = npu * (tid + 1) // nth, nact, s, q, u, unext, nxt, g, j0, j1, i, row, t
    cdef int64_t *rh = roffs + tid * 2 * B  # this thread's row offsets into the state
    cdef int64_t *rx = rh + B  # and into x
    cdef float *hsrc
    cdef float *hdst
    sj_pack_f(w_ih, H, G, K, wp_ih, u0 * G, u1 * G)
    sj_pack_f(w_hh, H, G, H, wp_hh, u0 * G, u1 * G)
    for i in range(B):
        rh[i] = i * H
    nact = _running(lens, B, 0)
    _project_step(x, wp_ih, xs, rx, lens, order, nact, 0, reverse, B, K, H, G, u0, u1)
    for s in range(nsteps):
        nact = _running(lens, nact, s)
        hsrc = hs + (s % 2) * B * H
        hdst = hs + (1 - s % 2) * B * H
        if s > 0:  # every thread's units of hsrc are written (and hdst is read by no one any more)
            sj_wait(done, nth * s)
        for q in range(u1 - u0):
            # zig-zag, as in _steps: the panels used last, still in L2, come first
            u = u0 + q if s % 2 == 0 else u1 - 1 - q
            unext = -1 if q + 1 == u1 - u0 else u + 1 if s % 2 == 0 else u - 1
            j0 = u * NR
            j1 = min(H, j0 + NR)
            for g in range(G):
                nxt = (u * G + g + 1 if g + 1 < G else unext * G) * H * NR
                sj_panel_f(wp_hh + (u * G + g) * H * NR, hsrc, rh, H, nact, hh + g * H + j0, GH, j1 - j0,
                           wp_hh + nxt if nxt >= 0 else NULL)
        if u1 > u0:  # the gate math over all of this thread's units at once (longer vector loops)
            _gates(xs, hh, b, bhn, hsrc, hdst, cs, out, lens, order, nact, s, reverse, lstm, B, H, GH, ldo, col,
                   u0 * NR, min(H, u1 * NR))
        sj_signal(done)
        if s + 1 < nsteps:
            _project_step(x, wp_ih, xs, rx, lens, order, _running(lens, nact, s + 1), s + 1, reverse, B, K, H,
                          G, u0, u1)


cdef inline void _gates(const float *xs, const float *hh, const float *b, const float *bhn, const float *hsrc,
                        float *hdst, float *cs, float *out, const int64_t *lens, const int64_t *order, long nact,
                        long s, bint reverse, bint lstm, long B, long H, long GH, long ldo, long col, long j0,
                        long j1) noexcept nogil:
    """The gate math of units ``j0 <= j < j1`` of the ``nact`` running rows at step ``s``."""
    cdef long i, row, t
    for i in range(nact):
        row = order[i]
        t = lens[i] - 1 - s if reverse else s
        if lstm:
            sj_lstm_units_f(xs + i * GH, hh + i * GH, b, cs + i * H, hdst + i * H,
                            out + (t * B + row) * ldo + col, H, j0, j1)
        else:
            sj_gru_units_f(xs + i * GH, hh + i * GH, b, bhn, hsrc + i * H, hdst + i * H,
                           out + (t * B + row) * ldo + col, H, j0, j1)


cdef void _layer_typed(const real[:, ::1] x2d, const real[:, ::1] w_ih, const real[:, ::1] w_hh,
                       const real[::1] bias, const real[::1] bhn, const real[:, ::1] h_init,
                       const real[:, ::1] c_init, const int64_t[::1] lengths, const int64_t[::1] order,
                       long nsteps, bint reverse, bint lstm, real[:, :, ::1] out, long col,
                       real[:, ::1] h_fin, real[:, ::1] c_fin, real[:, ::1] xp, real[:, :, ::1] hs,
                       real[:, ::1] cs, real[:, ::1] hh, int64_t[::1] lens, real[::1] wp_ih, real[::1] wp_hh,
                       int64_t[::1] roffs, int64_t[::1] done, bint panels, int workers):
    cdef long B = h_init.shape[0], H = h_init.shape[1], GH = w_hh.shape[0]
    cdef long T = out.shape[0], b, t, i, j, last
    cdef bint panels_done = False
    with nogil:
        for b in range(B):  # padded output steps are zero
            for t in range(lengths[b], T):
                for j in range(H):
                    out[t, b, col + j] = 0
        if nsteps == 0:
            for b in range(B):
                for j in range(H):
                    h_fin[b, j] = h_init[b, j]
                    c_fin[b, j] = c_init[b, j]
            return
        for i in range(B):
            lens[i] = lengths[order[i]]
            for j in range(H):
                hs[0, i, j] = h_init[order[i], j]
                cs[i, j] = c_init[order[i], j]
        if real is float:
            if panels:  # the large-batch float32 path
                with parallel(num_threads=workers):
                    _run_panels(&x2d[0, 0], &w_ih[0, 0], &wp_ih[0], x2d.shape[1], &w_hh[0, 0], &wp_hh[0], &bias[0],
                                &bhn[0], &hs[0, 0, 0], &cs[0, 0], &xp[0, 0], &hh[0, 0], &roffs[0], &done[0], &lens[0], &order[0],
                                B, H, GH // H, nsteps, reverse, lstm, &out[0, 0, 0], out.shape[2], col)
                panels_done = True
        if not panels_done:
            with parallel(num_threads=workers):
                _run(&x2d[0, 0], &w_ih[0, 0], &xp[0, 0], x2d.shape[0], x2d.shape[1], &w_hh[0, 0], &bias[0], &bhn[0],
                     &hs[0, 0, 0], &cs[0, 0], &hh[0, 0], &done[0], &lens[0], &order[0], B, H, GH // H, nsteps, reverse,
                     lstm, &out[0, 0, 0], out.shape[2], col)
        for i in range(B):  # a row's final state sits in the buffer its own last step wrote
            last = 0 if lens[i] == 0 else 1 - (lens[i] - 1) % 2
            for j in range(H):
                h_fin[order[i], j] = hs[last, i, j]
                c_fin[order[i], j] = cs[i, j]


def isa() -> str:
    """The instruction-set variant the row, gate and panel kernels run: "avx512", "avx2" or
    "baseline" (the CPU's best under $SEQJIT_ISA)."""
    return sj_rnn_isa().decode()


def _layer(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, long nsteps, bint reverse, bint lstm,
           out, long col, h_fin, c_fin, int workers):
    """One layer and direction on ``workers`` threads; see :mod:`._driver` for the arguments."""
    B, H = h_init.shape
    dtype = x2d.dtype
    b = bx + bh  # the gate math's biases: summed, but the GRU's b_hn is added to the n gate's hidden part
    bhn = b if lstm else np.ascontiguousarray(bh[2 * H:])
    if not lstm:
        b[2 * H:] = bx[2 * H:]
    hs = aligned_empty((2, B, H), dtype)  # double-buffered state, rows in `order`
    cs = np.empty((B, H), dtype)
    hh = aligned_empty((B, w_hh.shape[0]), dtype)  # hidden projection of the current step
    lens = np.empty(B, np.int64)
    panels = _driver.use_panels(B, nsteps, dtype)
    # the input projection: of every step (dot path), of the next step (panel path)
    xp = aligned_empty((B if panels else x2d.shape[0] if nsteps else 1, w_hh.shape[0]), dtype)
    # packed W_ih and W_hh panels (panel path): ceil(H/32)*G panels of [K, 32] each
    npan = (H + 31) // 32 * (w_hh.shape[0] // H) if panels else 0
    wp_ih = _driver.workspace("wp_ih", max(1, npan * 32 * x2d.shape[1]), dtype)
    wp_hh = _driver.workspace("wp_hh", max(1, npan * 32 * H), dtype)
    roffs = np.empty(max(1, 2 * B * workers if panels else 1), np.int64)  # per thread: rows of h and x
    done = np.zeros(1, np.int64)  # the panel path's step signals
    if dtype == np.float32:
        _layer_typed[float](x2d, w_ih, w_hh, b, bhn, h_init, c_init, lengths, order, nsteps, reverse, lstm,
                            out, col, h_fin, c_fin, xp, hs, cs, hh, lens, wp_ih, wp_hh, roffs, done, panels, workers)
    else:
        _layer_typed[double](x2d, w_ih, w_hh, b, bhn, h_init, c_init, lengths, order, nsteps, reverse, lstm,
                             out, col, h_fin, c_fin, xp, hs, cs, hh, lens, wp_ih, wp_hh, roffs, done, False, workers)


def gru(x, params, *, h0=None, lengths=None, batch_first=False):
    """See :func:`seqjit.kernels.rnn.reference.gru`."""
    return _driver.run_sequence(spec.prepare_sequence("gru", x, params, h0, lengths, batch_first), _layer)


def lstm(x, params, *, state0=None, lengths=None, batch_first=False):
    """See :func:`seqjit.kernels.rnn.reference.lstm`."""
    return _driver.run_sequence(spec.prepare_sequence("lstm", x, params, state0, lengths, batch_first), _layer)


def gru_cell(x, h, w_ih, w_hh, b_ih=None, b_hh=None, *, out=None):
    """See :func:`seqjit.kernels.rnn.reference.gru_cell`."""
    return _driver.run_cell(spec.prepare_cell("gru", x, h, None, w_ih, w_hh, b_ih, b_hh, out), _layer, False)


def lstm_cell(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    """See :func:`seqjit.kernels.rnn.reference.lstm_cell`."""
    return _driver.run_cell(spec.prepare_cell("lstm", x, h, c, w_ih, w_hh, b_ih, b_hh, None), _layer, True)
