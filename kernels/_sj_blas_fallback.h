/* Portable column-major GEMM and GEMV with the Fortran BLAS calling convention of
   scipy.linalg.cython_blas (every argument by pointer, 32-bit integers), for a seqjit installed
   without scipy (the optional ``blas`` extra): the Cython kernels call BLAS through pointers
   (kernels/_blas_ptrs.pxi) that point at scipy's OpenBLAS when it is installed and at these
   otherwise, so every code path runs either way, only slower without it (results round
   differently, within each dtype's accuracy of the NumPy reference).

   C = alpha op(A) op(B) + beta C, A op(A) m x k, B op(B) k x n; beta == 0 overwrites C (NaN in
   C is not propagated, as in BLAS). The blocked kernels (_sj_blas_fallback_body.h) are compiled
   for AVX-512, AVX2 + FMA and the baseline and picked by CPU features (capped by $SEQJIT_ISA:
   _runtime/isa_cap.h) at the first call, like
   linear/native_gemv.h; the plain loops below (sj_*_naive) take what they do not: a failed
   scratch allocation, strided or negative increments. */
#ifndef SJ_BLAS_FALLBACK_H
#define SJ_BLAS_FALLBACK_H
#include <stddef.h>
#include <stdlib.h>
#include "_runtime/isa_cap.h"

static inline int sj_blas_trans(const char *t) { return *t == 'T' || *t == 't' || *t == 'C' || *t == 'c'; }

#define SJ_DEFINE_FALLBACK(T, P)                                                                         \
static void sj_##P##gemm_naive(char *ta, char *tb, int *pm, int *pn, int *pk, T *palpha, T *a,         \
                                  int *plda, T *b, int *pldb, T *pbeta, T *c, int *pldc) {                \
    const int m = *pm, n = *pn, k = *pk, tra = sj_blas_trans(ta), trb = sj_blas_trans(tb);             \
    const ptrdiff_t lda = *plda, ldb = *pldb, ldc = *pldc;                                               \
    const T alpha = *palpha, beta = *pbeta;                                                              \
    for (int j = 0; j < n; j++) {                                                                        \
        T *cj = c + j * ldc;                                                                             \
        if (beta == 0) { for (int i = 0; i < m; i++) cj[i] = 0; }                                        \
        else if (beta != 1) { for (int i = 0; i < m; i++) cj[i] *= beta; }                               \
        if (alpha == 0) continue;                                                                        \
        if (!tra) {                                                                                      \
            for (int l = 0; l < k; l++) {                                                                \
                const T bl = alpha * (trb ? b[j + l * ldb] : b[l + j * ldb]);                            \
                const T *al = a + l * lda;                                                               \
                for (int i = 0; i < m; i++) cj[i] += al[i] * bl;                                         \
            }                                                                                            \
        } else {                                                                                         \
            for (int i = 0; i < m; i++) {                                                                \
                const T *ai = a + i * lda;                                                               \
                T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                        \
                int l = 0;                                                                               \
                if (!trb) {                                                                              \
                    const T *bj = b + j * ldb;                                                           \
                    for (; l + 4 <= k; l += 4) {                                                         \
                        s0 += ai[l] * bj[l]; s1 += ai[l + 1] * bj[l + 1];                                \
                        s2 += ai[l + 2] * bj[l + 2]; s3 += ai[l + 3] * bj[l + 3];                        \
                    }                                                                                    \
                    for (; l < k; l++) s0 += ai[l] * bj[l];                                              \
                } else {                                                                                 \
                    for (; l < k; l++) s0 += ai[l] * b[j + l * ldb];                                     \
                }                                                                                        \
                cj[i] += alpha * ((s0 + s1) + (s2 + s3));                                                \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
}                                                                                                        \
                                                                                                         \
/* y = alpha op(A) x + beta y, A m x n column-major: op(A) = A gives m outputs, A^T gives n */           \
static void sj_##P##gemv_naive(char *trans, int *pm, int *pn, T *palpha, T *a, int *plda, T *x,        \
                                  int *pincx, T *pbeta, T *y, int *pincy) {                               \
    const int m = *pm, n = *pn, tr = sj_blas_trans(trans);                                               \
    const ptrdiff_t lda = *plda, incx = *pincx, incy = *pincy;                                           \
    const T alpha = *palpha, beta = *pbeta;                                                              \
    const int ny = tr ? n : m, nx = tr ? m : n;                                                          \
    T *y0 = incy < 0 ? y - (ny - 1) * incy : y;                                                          \
    const T *x0 = incx < 0 ? x - (nx - 1) * incx : x;                                                    \
    for (int i = 0; i < ny; i++) y0[i * incy] = beta == 0 ? 0 : beta * y0[i * incy];                     \
    if (alpha == 0) return;                                                                              \
    for (int j = 0; j < n; j++) {                                                                        \
        const T *aj = a + j * lda;                                                                       \
        if (tr) {                                                                                        \
            T s = 0;                                                                                     \
            for (int i = 0; i < m; i++) s += aj[i] * x0[i * incx];                                       \
            y0[j * incy] += alpha * s;                                                                   \
        } else {                                                                                         \
            const T xj = alpha * x0[j * incx];                                                           \
            for (int i = 0; i < m; i++) y0[i * incy] += aj[i] * xj;                                      \
        }                                                                                                \
    }                                                                                                    \
}

SJ_DEFINE_FALLBACK(float, s)
SJ_DEFINE_FALLBACK(double, d)
#undef SJ_DEFINE_FALLBACK


/* the blocked kernels, one variant per instruction set */
#define SJ_FB_NB 4
typedef float sj_fb_vf __attribute__((vector_size(64)));
typedef float sj_fb_vfu __attribute__((vector_size(64), aligned(4)));
typedef double sj_fb_vd __attribute__((vector_size(64)));
typedef double sj_fb_vdu __attribute__((vector_size(64), aligned(8)));
#define SJ_ISA_BODY "_sj_blas_fallback_body.h"
#include "_sj_isa_variants.h"

#if defined(__GNUC__) && defined(__x86_64__)
static int sj_fb_isa = -1;  /* 2: AVX-512, 1: AVX2 + FMA, 0: baseline; -1: not chosen yet */
static inline int sj_fb_pick(void) {
    if (sj_fb_isa < 0) sj_fb_isa = sj_isa_level();  /* the CPU's best under $SEQJIT_ISA */
    return sj_fb_isa;
}
#define SJ_FB_CALL(fn, ...) do { int isa_ = sj_fb_pick(); \
    if (isa_ == 2) sj_##fn##_avx512(__VA_ARGS__); else if (isa_ == 1) sj_##fn##_avx2(__VA_ARGS__); \
    else sj_##fn##_base(__VA_ARGS__); } while (0)
#else
static inline int sj_fb_pick(void) { return 0; }
#define SJ_FB_CALL(fn, ...) sj_##fn##_base(__VA_ARGS__)
#endif

#define SJ_FB_PUBLIC(T, P)                                                                                \
static void sj_##P##gemm_fallback(char *ta, char *tb, int *pm, int *pn, int *pk, T *palpha, T *a,         \
                                  int *plda, T *b, int *pldb, T *pbeta, T *c, int *pldc) {                \
    T *pack = NULL;                                                                                      \
    if (*pm > 0 && *pn > 0 && *pk > 0 && *palpha != 0)                                                   \
        pack = (T *)malloc(sizeof(T) * (size_t)(2 * 64 / sizeof(T)) * (size_t)*pk);                       \
    if (pack == NULL) {                                                                                  \
        sj_##P##gemm_naive(ta, tb, pm, pn, pk, palpha, a, plda, b, pldb, pbeta, c, pldc);                \
        return;                                                                                          \
    }                                                                                                    \
    SJ_FB_CALL(fb_##P##gemm, sj_blas_trans(ta), sj_blas_trans(tb), *pm, *pn, *pk, *palpha, a, *plda, b,   \
               *pldb, *pbeta, c, *pldc, pack);                                                            \
    free(pack);                                                                                          \
}                                                                                                        \
                                                                                                         \
static void sj_##P##gemv_fallback(char *trans, int *pm, int *pn, T *palpha, T *a, int *plda, T *x,        \
                                  int *pincx, T *pbeta, T *y, int *pincy) {                               \
    if (sj_blas_trans(trans) && *pincx == 1 && *pincy > 0 && *pm > 0)                                    \
        SJ_FB_CALL(fb_##P##gemv_t, *pm, *pn, *palpha, a, *plda, x, *pbeta, y, *pincy);                   \
    else                                                                                                 \
        sj_##P##gemv_naive(trans, pm, pn, palpha, a, plda, x, pincx, pbeta, y, pincy);                   \
}

SJ_FB_PUBLIC(float, s)
SJ_FB_PUBLIC(double, d)
#undef SJ_FB_PUBLIC

#endif
