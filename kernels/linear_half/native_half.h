/* linear_half and embedding_half for the native replay (seqjit.graph._native_vm): float32 products
   over 16-bit weights (IEEE fp16 or bf16 bits, uint16 [N, K] row-major, PyTorch's layout), widened
   to float32 inside the kernel (exact) and accumulated in float32.

   y[m, n] = dot(x[m, :], widen(W[n, :])) (+ bias[n]), columns [n0, n1) only (the caller splits N
   over threads), every output summed exactly as the float32 GEMV (linear/native_gemv.h) sums it:
   16-lane blocks into four chains, reduced by the same tree, the K % 16 tail in order. So a row's
   result depends neither on the rows beside it nor on the path, and equals the float32 linear's
   GEMV on the widened weights, bit for bit:
   - one row of x and K a multiple of 16: each weight row converted in registers as it is read (F16C
     vcvtph2ps / AVX-512's vcvtph2ps; bf16: zero-extend and shift left by 16), one pass over the
     weight bytes (1.6x the widened path's speed at one row from memory, Zen 3);
   - more rows, or a K % 16 tail (K <= SJ_HALF_BUF): blocks of weight rows widened into a 16 KB
     float32 buffer on the stack (L1), then the float32 GEMV (sj_gemv_rows of native_gemv_body.h,
     the same variant) over every row of x in blocks of SJ_HALF_MB rows: one conversion per weight
     for all the rows. (The tail's products are rounded or fused as the compiler chose for the float
     GEMV, so the one-row kernel leaves such K to it);
   - K above SJ_HALF_BUF: the one-row kernel for each row, at every row count.

   The body is compiled per instruction set (AVX-512 + F16C, AVX2 + FMA + F16C, the baseline: a
   portable bit conversion) and picked with the float GEMV's choice (sj_gemv_pick: $SEQJIT_ISA, or
   _native_vm.linear_isa's forcing), lowered to the baseline on a CPU without F16C. */
#ifndef SJ_NATIVE_HALF_H
#define SJ_NATIVE_HALF_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "linear/native_gemv.h"
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

/* fmt codes (kernels/linear_half/spec.py: FORMATS) */
#define SJ_HALF_F16 0
#define SJ_HALF_BF16 1
/* floats of the widened block of weight rows (16 KB: in L1 with a row block of x) */
#define SJ_HALF_BUF 4096
/* rows of x per pass over a widened block */
#define SJ_HALF_MB 16

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

static void sj_half_gemv(const float *x, ptrdiff_t ldx, int M, const uint16_t *w, int bf, int K,
                         const float *bias, float *y, ptrdiff_t ldy, int n0, int n1) {
#if defined(__GNUC__) && defined(__x86_64__)
    const int isa = sj_half_pick();
    if (isa == 2)
        sj_half_gemv_avx512(x, ldx, M, w, bf, K, bias, y, ldy, n0, n1);
    else if (isa == 1)
        sj_half_gemv_avx2(x, ldx, M, w, bf, K, bias, y, ldy, n0, n1);
    else
#endif
        sj_half_gemv_base(x, ldx, M, w, bf, K, bias, y, ldy, n0, n1);
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
