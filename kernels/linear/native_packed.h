/* linear on prepacked weights for the native replay (seqjit.graph._native_vm), for products of more
   than SJ_GEMV_MAX_ROWS rows: y[m, n] = dot(x[m, :], W[n, :]) (+ bias[n]), columns of panels
   [p0, p1) only, so the caller can give each thread its own panels.

   Layout ("packed", made once per weight by kernels/linear/packed.py at lowering): the N output columns in
   panels of SJ_PANEL (32) columns, each panel K rows of 32 floats, k-major and contiguous; columns
   past N are zero. A product then streams every weight byte once, in order (what the hardware
   prefetcher follows best), and a panel, once in cache, serves every row block of x.

   Kernel (BLIS/MLAS style): a tile of MR rows x 2 vectors of columns held in registers, one W
   vector pair loaded and one x value broadcast per row and k; for wide products of many rows x is
   packed first, a row block's values of each k side by side (one pointer through contiguous memory
   instead of a dozen rows: +8-16% from 80 rows and 2 MB of W, a loss below, on the Xeon of
   benchmarks/RESULTS.md; native_packed_body.h: SJ_PK_PACK_MIN_ROWS). MR
   up to 12 with AVX-512 (24 of the 32 zmm registers), 6 with AVX2 + FMA or the baseline (12 of 16), the 32 panel
   columns taken in 1, 2 or 4 such tiles. Rows are cut into equal blocks (16 rows: 8 + 8, not
   12 + 4). K above SJ_PACK_KC is cut into blocks so a block of x for every row stays in L2 while
   the panels stream past it (the partial sums then go through y). Each output is one FMA chain over
   k in order, bias added last, whatever the split: columns computed on one thread or two agree bit
   for bit.

   The body (native_packed_body.h) is compiled per instruction set (_sj_isa_variants.h) and picked
   with the GEMV's choice (native_gemv.h: sj_gemv_pick). */
#ifndef SJ_NATIVE_PACKED_H
#define SJ_NATIVE_PACKED_H
#include <stddef.h>
#include "linear/native_gemv.h"

#define SJ_PANEL 32
/* K of one block: 512 x 12 rows x 4 B = 24 KB of x per row block; K up to 1024 is not cut */
#define SJ_PACK_KC 512
#define SJ_PACK_KMAX_UNCUT 1024

/* Scratch for x packed by row block (the body's pk_pack_x), one buffer per thread, kept and grown
   across calls (freed at thread exit): a call must not fault in fresh pages, and the team's threads
   pack at the same time. NULL when it cannot be had; the body then packs one row block at a time
   into a buffer on its stack. */
#include <pthread.h>
#include <stdlib.h>
static pthread_key_t sj_pk_key;
static int sj_pk_key_ok;
static pthread_once_t sj_pk_once = PTHREAD_ONCE_INIT;
typedef struct { float *p; size_t n; } sj_pk_buffer;
static void sj_pk_buffer_free(void *b) {
    free(((sj_pk_buffer *)b)->p);
    free(b);
}
static void sj_pk_key_make(void) { sj_pk_key_ok = pthread_key_create(&sj_pk_key, sj_pk_buffer_free) == 0; }
/* set by tests (seqjit.graph._native_vm.packed_scratch) to run the path without scratch */
static int sj_pk_scratch_off;
static float *sj_pk_scratch(size_t n) {
    pthread_once(&sj_pk_once, sj_pk_key_make);
    if (!sj_pk_key_ok || sj_pk_scratch_off)
        return NULL;
    sj_pk_buffer *b = (sj_pk_buffer *)pthread_getspecific(sj_pk_key);
    if (!b) {
        if (!(b = (sj_pk_buffer *)calloc(1, sizeof *b)))
            return NULL;
        if (pthread_setspecific(sj_pk_key, b)) {
            free(b);
            return NULL;
        }
    }
    if (b->n < n) {
        const size_t want = (n + 4095) & ~(size_t)4095; /* floats, a whole number of 16 KB */
        float *p = (float *)aligned_alloc(64, want * sizeof(float));
        if (!p)
            return NULL;
        free(b->p);
        b->p = p, b->n = want;
    }
    return b->p;
}

#define SJ_ISA_BODY "linear/native_packed_body.h"
#include "_sj_isa_variants.h"

static inline int sj_panels(int N) { return (N + SJ_PANEL - 1) / SJ_PANEL; }

static void sj_packed_rows(const float *x, ptrdiff_t ldx, int M, const float *wp, int K, int N,
                           const float *bias, float *y, ptrdiff_t ldy, int p0, int p1) {
    SJ_DISPATCH(packed_rows, x, ldx, M, wp, K, N, bias, y, ldy, p0, p1);
}
#endif
