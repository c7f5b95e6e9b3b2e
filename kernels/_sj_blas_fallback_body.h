/* Body of _sj_blas_fallback.h, included once per instruction set with SJ_NAME(x) naming the
   variant (kernels/_sj_isa_variants.h). No include guard: that is the point.

   GEMM: op(A) is packed SJ_FB_MB rows at a time, k-major and zero-padded (a transpose when op(A)
   = A^T), then each block of SJ_FB_MB x SJ_FB_NB outputs is summed over k in registers (two
   vectors x four columns: eight FMA chains) and written once: C = alpha acc + beta C.
   GEMV: op(A) = A is a column AXPY per x element; op(A) = A^T a dot product per output in vectors. */

#define SJ_FB_DEFINE(T, P, VT, VTU, VL)                                                                   \
static void SJ_NAME(fb_##P##gemm)(int tra, int trb, int m, int n, int k, T alpha, const T *a,             \
                                  ptrdiff_t lda, const T *b, ptrdiff_t ldb, T beta, T *c, ptrdiff_t ldc,  \
                                  T *pack) {                                                              \
    enum { MB = 2 * VL, NB = SJ_FB_NB };                                                                  \
    for (int i0 = 0; i0 < m; i0 += MB) {                                                                  \
        const int mb = m - i0 < MB ? m - i0 : MB;                                                         \
        if (!tra) {                                                                                       \
            for (int l = 0; l < k; l++) {                                                                 \
                const T *src = a + i0 + l * lda;                                                          \
                T *dst = pack + (ptrdiff_t)l * MB;                                                        \
                for (int ii = 0; ii < mb; ii++) dst[ii] = src[ii];                                        \
                for (int ii = mb; ii < MB; ii++) dst[ii] = 0;                                             \
            }                                                                                             \
        } else {                                                                                          \
            for (int ii = 0; ii < MB; ii++) {                                                             \
                const T *src = a + (i0 + ii) * lda;                                                       \
                for (int l = 0; l < k; l++) pack[(ptrdiff_t)l * MB + ii] = ii < mb ? src[l] : 0;          \
            }                                                                                             \
        }                                                                                                 \
        for (int j0 = 0; j0 < n; j0 += NB) {                                                              \
            const int nb = n - j0 < NB ? n - j0 : NB;                                                     \
            ptrdiff_t bj[NB], bl;                                                                         \
            for (int jj = 0; jj < NB; jj++) {                                                             \
                const ptrdiff_t j = j0 + (jj < nb ? jj : nb - 1); /* past the edge: read, not kept */    \
                bj[jj] = trb ? j : j * ldb;                                                               \
            }                                                                                             \
            bl = trb ? ldb : 1;                                                                           \
            VT acc[NB][2];                                                                                \
            for (int jj = 0; jj < NB; jj++) { acc[jj][0] = (VT){0}; acc[jj][1] = (VT){0}; }               \
            for (int l = 0; l < k; l++) {                                                                 \
                const VT a0 = *(const VTU *)(pack + (ptrdiff_t)l * MB);                                   \
                const VT a1 = *(const VTU *)(pack + (ptrdiff_t)l * MB + VL);                              \
                for (int jj = 0; jj < NB; jj++) {                                                         \
                    const T bv = b[bj[jj] + l * bl];                                                      \
                    acc[jj][0] += a0 * bv;                                                                \
                    acc[jj][1] += a1 * bv;                                                                \
                }                                                                                         \
            }                                                                                             \
            for (int jj = 0; jj < nb; jj++) {                                                             \
                T *cj = c + i0 + (ptrdiff_t)(j0 + jj) * ldc;                                              \
                for (int ii = 0; ii < mb; ii++) {                                                         \
                    const T r = alpha * acc[jj][ii / VL][ii % VL];                                        \
                    cj[ii] = beta == 0 ? r : r + beta * cj[ii];                                           \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }                                                                                                     \
}                                                                                                         \
                                                                                                          \
/* y[j] = alpha dot(A[:, j], x) + beta y[j], j < n (A m x n, x contiguous, y[j * incy]) */              \
static void SJ_NAME(fb_##P##gemv_t)(int m, int n, T alpha, const T *a, ptrdiff_t lda, const T *x,        \
                                    T beta, T *y, ptrdiff_t incy) {                                       \
    const int mv = m - m % (2 * VL);                                                                      \
    for (int j = 0; j < n; j++) {                                                                         \
        const T *aj = a + j * lda;                                                                        \
        VT s0 = {0}, s1 = {0};                                                                            \
        for (int i = 0; i < mv; i += 2 * VL) {                                                            \
            s0 += *(const VTU *)(aj + i) * *(const VTU *)(x + i);                                         \
            s1 += *(const VTU *)(aj + i + VL) * *(const VTU *)(x + i + VL);                               \
        }                                                                                                 \
        s0 += s1;                                                                                         \
        T s = 0;                                                                                          \
        for (int v = 0; v < VL; v++) s += s0[v];                                                          \
        for (int i = mv; i < m; i++) s += aj[i] * x[i];                                                   \
        y[j * incy] = beta == 0 ? alpha * s : alpha * s + beta * y[j * incy];                             \
    }                                                                                                     \
}

/* vectors of the variant's own width: 64-byte vectors on AVX2 or the baseline were lowered through the
   stack (GCC splits what the target cannot hold, then spills the halves) */
#if defined(__AVX512F__)
#define SJ_FB_VB 64
#elif defined(__AVX__)
#define SJ_FB_VB 32
#else
#define SJ_FB_VB 16
#endif
typedef float SJ_NAME(fb_vf) __attribute__((vector_size(SJ_FB_VB)));
typedef float SJ_NAME(fb_vfu) __attribute__((vector_size(SJ_FB_VB), aligned(4)));
typedef double SJ_NAME(fb_vd) __attribute__((vector_size(SJ_FB_VB)));
typedef double SJ_NAME(fb_vdu) __attribute__((vector_size(SJ_FB_VB), aligned(8)));
SJ_FB_DEFINE(float, s, SJ_NAME(fb_vf), SJ_NAME(fb_vfu), (SJ_FB_VB / 4))
SJ_FB_DEFINE(double, d, SJ_NAME(fb_vd), SJ_NAME(fb_vdu), (SJ_FB_VB / 8))
#undef SJ_FB_VB
#undef SJ_FB_DEFINE
