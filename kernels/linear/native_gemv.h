/* linear at decode shapes for the native replay (seqjit.graph._native_vm):
   y[m, n] = dot(x[m, :], W[n, :]) (+ bias[n]) for W "out_in" [N, K] row-major (sj_gemv_rows), or
   y[m, :] = x[m, :] @ W (+ bias) for W "in_out" [K, N] (sj_gemv_rows_in_out); columns [n0, n1)
   only, so the caller can split N over threads.

   "out_in": 1-4 rows of x read two rows of W at a time (four with AVX-512 at 2-4 rows), each
   reused for every x row, four FMA chains per dot product (16-lane block j into chain j % 4): the
   same sums at any row count. "in_out": blocks of up to 12 x rows packed k-major, 32 columns per
   pass, every output one FMA chain over k. Lanes are summed at the end (a tree), so results round
   differently from BLAS, within float32 accuracy of the NumPy reference.

   The body (native_gemv_body.h) is compiled three times on x86-64, for AVX-512, AVX2 + FMA and
   the baseline, and the first call picks one by CPU features capped by $SEQJIT_ISA
   (_runtime/isa_cap.h), so the module needs no -m flags and runs on any x86-64 (other machines
   build the portable variant only). */
#ifndef SJ_NATIVE_GEMV_H
#define SJ_NATIVE_GEMV_H
#include <stddef.h>
#include "_runtime/isa_cap.h"

#define SJ_GEMV_MAX_ROWS 4
#define SJ_LANES 16
/* the in_out kernel packs up to 12 rows of x k-major on the stack (48 KB): larger K runs 4 rows at a time */
#define SJ_PACK_MAX_K 1024
/* 16 floats as one GCC vector: a zmm register with AVX-512, two ymm with AVX2, four xmm otherwise;
   the "u" type is the same, aligned to a float, for loads from any address */
typedef float sj_v16 __attribute__((vector_size(64)));
typedef float sj_v16u __attribute__((vector_size(64), aligned(4)));
typedef float sj_v8 __attribute__((vector_size(32)));
typedef float sj_v4 __attribute__((vector_size(16)));

#define SJ_ISA_BODY "linear/native_gemv_body.h"
#include "_sj_isa_variants.h"

#if defined(__GNUC__) && defined(__x86_64__)
static int sj_gemv_isa = -1;  /* 2: AVX-512, 1: AVX2 + FMA, 0: baseline; -1: not chosen yet */

static inline int sj_gemv_pick(void) {
    if (sj_gemv_isa < 0) sj_gemv_isa = sj_isa_level();
    return sj_gemv_isa;
}
#define SJ_DISPATCH(fn, ...) do { int isa_ = sj_gemv_pick(); \
    if (isa_ == 2) sj_##fn##_avx512(__VA_ARGS__); else if (isa_ == 1) sj_##fn##_avx2(__VA_ARGS__); \
    else sj_##fn##_base(__VA_ARGS__); } while (0)
/* the same choice, as an expression: the chosen variant's result */
#define SJ_DISPATCH_VALUE(fn, ...) (sj_gemv_pick() == 2 ? sj_##fn##_avx512(__VA_ARGS__) \
    : sj_gemv_pick() == 1 ? sj_##fn##_avx2(__VA_ARGS__) : sj_##fn##_base(__VA_ARGS__))
#else
static int sj_gemv_isa = 0;
static inline int sj_gemv_pick(void) { return 0; }
#define SJ_DISPATCH(fn, ...) sj_##fn##_base(__VA_ARGS__)
#define SJ_DISPATCH_VALUE(fn, ...) sj_##fn##_base(__VA_ARGS__)
#endif

/* the variant the CPU supports best under $SEQJIT_ISA (sj_gemv_pick's choice), ignoring a forced
   sj_gemv_isa */
static inline int sj_gemv_best(void) {
    int forced = sj_gemv_isa, best;
    sj_gemv_isa = -1;
    best = sj_gemv_pick();
    sj_gemv_isa = forced < 0 ? best : forced;
    return best;
}

static void sj_gemv_rows(const float *x, ptrdiff_t ldx, int M, const float *w, int K, const float *bias,
                         float *y, ptrdiff_t ldy, int n0, int n1) {
    SJ_DISPATCH(gemv_rows, x, ldx, M, w, K, bias, y, ldy, n0, n1);
}

static void sj_gemv_rows_in_out(const float *x, ptrdiff_t ldx, int M, const float *w, int K, int N,
                                const float *bias, float *y, ptrdiff_t ldy, int n0, int n1) {
    SJ_DISPATCH(gemv_rows_in_out, x, ldx, M, w, K, N, bias, y, ldy, n0, n1);
}
#endif
