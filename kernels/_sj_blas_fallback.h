/* Portable column-major GEMM and GEMV with the Fortran BLAS calling convention of
   scipy.linalg.cython_blas (every argument by pointer, 32-bit integers), for a seqjit installed
   without scipy (the optional ``blas`` extra): the Cython kernels call BLAS through pointers
   (kernels/_blas_ptrs.pxi) that point at scipy's OpenBLAS when it is installed and at these
   otherwise, so every code path gives the same results either way, only slower without it.

   C = alpha op(A) op(B) + beta C, A op(A) m x k, B op(B) k x n; beta == 0 overwrites C (NaN in
   C is not propagated, as in BLAS). Loop orders keep the innermost loop contiguous: op(A) = A
   is a column AXPY per k, op(A) = A^T a dot product per element (four partial sums). */
#ifndef SJ_BLAS_FALLBACK_H
#define SJ_BLAS_FALLBACK_H
#include <stddef.h>

static inline int sj_blas_trans(const char *t) { return *t == 'T' || *t == 't' || *t == 'C' || *t == 'c'; }

#define SJ_DEFINE_FALLBACK(T, P)                                                                         \
static void sj_##P##gemm_fallback(char *ta, char *tb, int *pm, int *pn, int *pk, T *palpha, T *a,         \
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
static void sj_##P##gemv_fallback(char *trans, int *pm, int *pn, T *palpha, T *a, int *plda, T *x,        \
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

#endif
