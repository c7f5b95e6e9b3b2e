/* linear_half and embedding_half for the native replay (seqjit.graph._native_vm): float32 products
   over 16-bit weights (IEEE fp16 or bf16 bits), widened to float32 inside the kernel (exact) and
   accumulated in float32.

   Layout: the weight uint16 [N, K] ("out_in", PyTorch's) packed once at lowering into panels as the
   float32 packed layout (linear/native_packed.h; kernels/linear_half/packed.py): SJ_PANEL (32)
   columns per panel, each panel K rows of 32 values, k-major and contiguous, zero past N. A product
   streams the 16-bit bytes once, in order.

   y[m, n] = dot(x[m, :], widen(W[n, :])) (+ bias[n]), the columns of panels [p0, p1) (the caller
   splits the panels over threads). Every output is one FMA chain over k in order from zero, bias
   added last, as the packed float32 kernel sums it, on every path, so a row's result depends
   neither on the rows beside it, nor on the thread split, nor on the path:
   - up to SJ_HALF_DIRECT (16; bf16 SJ_HALF_DIRECT_BF16, 8) rows: each panel row converted in
     registers as it is read (F16C vcvtph2ps / AVX-512's vcvtph2ps; bf16: zero-extend, shift left by
     16), one x value broadcast per row, a tile of rows x 32 columns in registers (6 rows with
     AVX-512, 2 with AVX2, 1 otherwise): faster than widening (below) at few rows, level at 16
     (measured: benchmarks/RESULTS.md, "Figures moved out of docstrings");
   - more rows: each panel widened into a per-thread float32 buffer (K x 32 floats: in L2 for
     Marian's K) and the packed float32 micro-kernel (native_packed_body.h's packed_rows, the same
     variant) run over it for every row: one conversion per weight for all the rows.

   The body is compiled per instruction set (AVX-512 + F16C, AVX2 + FMA + F16C, the baseline: a
   portable bit conversion) and picked with the float GEMV's choice (sj_gemv_pick: $SEQJIT_ISA, or
   _native_vm.linear_isa's forcing), lowered to the baseline on a CPU without F16C. */
#ifndef SJ_NATIVE_HALF_H
#define SJ_NATIVE_HALF_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "linear/native_gemv.h"
#include "linear/native_packed.h"
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

/* fmt codes (kernels/linear_half/spec.py: FORMATS) */
#define SJ_HALF_F16 0
#define SJ_HALF_BF16 1
/* rows up to which the weights are converted in registers (more: widened per panel), fp16 and bf16:
   bf16's conversion (zero-extend, shift) costs more in the tile's loop than vcvtph2ps, so widening
   pays for bf16 from fewer rows (measured: benchmarks/RESULTS.md, "Figures moved out of docstrings") */
#ifndef SJ_HALF_DIRECT
#define SJ_HALF_DIRECT 16
#endif
#ifndef SJ_HALF_DIRECT_BF16
#define SJ_HALF_DIRECT_BF16 8
#endif

/* The per-thread float32 buffer of one widened panel, kept and grown across calls (freed at thread
   exit), as native_packed.h's x scratch (which packed_rows may use at the same time: a buffer of its
   own). NULL when it cannot be had: the direct path then runs every row. */
static pthread_key_t sj_half_key;
static int sj_half_key_ok;
static pthread_once_t sj_half_once = PTHREAD_ONCE_INIT;
static void sj_half_key_make(void) { sj_half_key_ok = pthread_key_create(&sj_half_key, sj_pk_buffer_free) == 0; }
static float *sj_half_scratch(size_t n) {
    pthread_once(&sj_half_once, sj_half_key_make);
    if (!sj_half_key_ok)
        return NULL;
    sj_pk_buffer *b = (sj_pk_buffer *)pthread_getspecific(sj_half_key);
    if (!b) {
        if (!(b = (sj_pk_buffer *)calloc(1, sizeof *b)))
            return NULL;
        if (pthread_setspecific(sj_half_key, b)) {
            free(b);
            return NULL;
        }
    }
    if (b->n < n) {
        const size_t want = (n + 4095) & ~(size_t)4095;
        float *p = (float *)aligned_alloc(64, want * sizeof(float));
        if (!p)
            return NULL;
        free(b->p);
        b->p = p, b->n = want;
    }
    return b->p;
}

/* IEEE binary16 bits -> float32, exact (subnormals scaled by 2^-24; inf and NaN payloads kept) */
static inline float sj_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t bits;
    float f;
    if (e == 0x1f)
        bits = sign | 0x7f800000u | (m << 13);
    else if (e)
        bits = sign | ((e + 112u) << 23) | (m << 13);
    else {
        f = (float)m * 0x1p-24f; /* 0 or a subnormal: m * 2^-24 is exact in float32 */
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    memcpy(&f, &bits, 4);
    return f;
}

static inline float sj_bf16_to_f32(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float sj_half_to_f32(uint16_t h, int bf) { return bf ? sj_bf16_to_f32(h) : sj_f16_to_f32(h); }

#define SJ_ISA_BODY "linear_half/native_half_body.h"
#if defined(__GNUC__) && defined(__x86_64__)
/* _sj_isa_variants.h's three variants, with F16C for the two vector ones */
#define SJ_NAME(x) sj_##x##_base
#include SJ_ISA_BODY
#undef SJ_NAME
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define SJ_NAME(x) sj_##x##_avx2
#include SJ_ISA_BODY
#undef SJ_NAME
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma,f16c")
#define SJ_NAME(x) sj_##x##_avx512
#include SJ_ISA_BODY
#undef SJ_NAME
#pragma GCC pop_options
#else
#define SJ_NAME(x) sj_##x##_base
#include SJ_ISA_BODY
#undef SJ_NAME
#endif
#undef SJ_ISA_BODY

/* the variant of the half kernels: the float GEMV's, the baseline where the CPU lacks F16C */
static inline int sj_half_pick(void) {
    int isa = sj_gemv_pick();
#if defined(__GNUC__) && defined(__x86_64__)
    if (isa > 0 && !__builtin_cpu_supports("f16c"))
        isa = 0;
#endif
    return isa;
}

static void sj_half_packed(const float *x, ptrdiff_t ldx, int M, const uint16_t *wp, int bf, int K, int N,
                           const float *bias, float *y, ptrdiff_t ldy, int p0, int p1) {
#if defined(__GNUC__) && defined(__x86_64__)
    const int isa = sj_half_pick();
    if (isa == 2)
        sj_half_packed_avx512(x, ldx, M, wp, bf, K, N, bias, y, ldy, p0, p1);
    else if (isa == 1)
        sj_half_packed_avx2(x, ldx, M, wp, bf, K, N, bias, y, ldy, p0, p1);
    else
#endif
        sj_half_packed_base(x, ldx, M, wp, bf, K, N, bias, y, ldy, p0, p1);
}

/* out[i] = widen(table[ids[i]]) * scale (+ positions[i % L]), in float32; returns -1, or the index of
   the first id outside [0, V) (nothing is read for it) */
static ptrdiff_t sj_half_embedding(const int64_t *ids, ptrdiff_t n, const uint16_t *table, int bf, ptrdiff_t V,
                                   int D, float scale, const float *positions, ptrdiff_t L, float *out) {
    for (ptrdiff_t i = 0; i < n; i++) {
        const int64_t t = ids[i];
        if (t < 0 || t >= V)
            return i;
        const uint16_t *row = table + t * D;
        const float *pos = positions ? positions + (i % L) * D : NULL;
        float *o = out + i * D;
        for (int d = 0; d < D; d++) {
            const float v = sj_half_to_f32(row[d], bf) * scale;
            o[d] = pos ? v + pos[d] : v;
        }
    }
    return -1;
}
#endif
