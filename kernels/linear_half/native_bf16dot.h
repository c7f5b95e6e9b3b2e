/* bf16 arithmetic for linear_half (arith 1, bfloat16 weights only): the products as AVX512-BF16's
   vdpbf16ps computes them, accumulated in float32.

   Numbers: x rounded to bf16 (to nearest, ties to even; a float32 subnormal counts as zero, as
   vcvtne2ps2bf16 reads it; NaN made quiet), the weights' bf16 subnormals zeroed when packed
   (kernels/linear_half/packed.py: vdpbf16ps reads them as zero), and for each output one float32
   chain over the K pairs in order from zero: acc += x[2i+1] * w[2i+1], then acc += x[2i] * w[2i]
   (vdpbf16ps's definition; a product of two bf16 values is exact in float32, so each step rounds
   once), bias added last. Odd K: the last pair's second element is zero on both sides. Every path
   computes that chain, so a row's result depends neither on the rows beside it (M), nor on the
   thread split, nor on the path (checked bit for bit against the hardware on Zen 4):
   - sj_bf16_rows_native: vdpbf16ps on a CPU with AVX512-BF16 at the AVX-512 level, a tile of
     SJ_BF_MR rows x 32 columns in registers (28 accumulators), K in chunks of SJ_BF_KC pairs so a
     chunk of the panel stays in cache while every row block takes it (partial sums kept in y);
     up to 3 rows, four panels at once (sj_bf_tile4);
   - the portable body (native_bf16dot_body.h, per instruction set): each pair widened in registers
     (high half: bits & 0xffff0000, low half: bits << 16), FMAs (or a multiply and an add: the
     product being exact, the same number) in the same order.
   One exception: vdpbf16ps flushes a subnormal partial sum to zero; the portable path keeps it
   (a sum below 2^-126 in magnitude).

   Layouts: x as uint32 pairs (K2 = ceil(K / 2) a row; low half x[2i], high half x[2i+1]) in row
   blocks of at most SJ_BF_MR rows, pair-major in each (sj_bf16_round_rows), made into the
   instruction's buffer (the lowering's, one per plan) before the products split over threads; W as
   pair panels [panels(N)][K2][32] uint32 (packed.py's pack_bf16_pairs), lane j of pair row i
   holding W[n0 + j, 2i] | W[n0 + j, 2i + 1] << 16, zero past N and past K. */
#ifndef SJ_NATIVE_BF16DOT_H
#define SJ_NATIVE_BF16DOT_H
#include "linear_half/native_half.h"

/* float32 -> bf16 bits, rounded to nearest even; a subnormal (or zero) to a zero of its sign; NaN quiet */
static inline uint16_t sj_bf16_round(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7f800000u) == 0)
        return (uint16_t)((b >> 16) & 0x8000u);
    if ((b & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((b >> 16) | 0x40u);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

/* rows of one tile (28 accumulators, 2 weight vectors, 1 x pair: 31 of the 32 zmm; faster than 12
   rows at M 320) and K pairs per chunk (64 KB of panel, in
   L2: at M 320 on Zen 4, chunks of 128 and 256 pairs (in L1) were slower than 512, and no chunking
   level with it; benchmarks/half/bf16_gemm.py) */
#define SJ_BF_MR 14
#ifndef SJ_BF_KC
#define SJ_BF_KC 512
#endif
/* x's row blocks: ceil(M / SJ_BF_MR) blocks of balanced sizes (the first M % blocks one row more);
   block b's first row */
static inline int sj_bf_nblocks(int M) { return (M + SJ_BF_MR - 1) / SJ_BF_MR; }
static inline int sj_bf_block_row(int M, int b) {
    const int nb = sj_bf_nblocks(M), base = M / nb, extra = M % nb;
    return b * base + (b < extra ? b : extra);
}

/* x[m, :K] (rows ldx apart) for m < M as bf16 pairs, row block by row block, each block pair-major:
   row m (the r-th of block b: first row m0, mr rows) pair i at xq[m0 * K2 + i * mr + r], so a tile
   reads its x in one stream (rows of x ldx apart would alias in L1 at K 2048) */
static void sj_bf16_round_rows_base(const float *x, ptrdiff_t ldx, int M, int K, uint32_t *xq) {
    const int K2 = (K + 1) / 2, nb = M > 0 ? sj_bf_nblocks(M) : 0;
    for (int b = 0; b < nb; b++) {
        const int m0 = sj_bf_block_row(M, b), mr = sj_bf_block_row(M, b + 1) - m0;
        uint32_t *q = xq + (ptrdiff_t)m0 * K2;
        for (int r = 0; r < mr; r++) {
            const float *row = x + (m0 + r) * ldx;
            for (int i = 0; i < K / 2; i++)
                q[i * mr + r] = (uint32_t)sj_bf16_round(row[2 * i]) | (uint32_t)sj_bf16_round(row[2 * i + 1]) << 16;
            if (K & 1)
                q[(K2 - 1) * mr + r] = sj_bf16_round(row[K - 1]);
        }
    }
}


#define SJ_ISA_BODY "linear_half/native_bf16dot_body.h"
#include "_sj_isa_variants.h"

#if defined(__GNUC__) && defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512bf16,avx2,fma")
/* y[r, 0:nv] (ldy apart) = (acc ? y[r, :] : 0) + the chain over kc pairs of xq[i * mr + r] and the
   panel rows w[i * 32 ..] (+ bias[0:nv] when bias), r < mr: inlined with a constant mr */
static inline __attribute__((always_inline)) void sj_bf_tile(const int mr, const uint32_t *xq,
                                                             const uint32_t *w, int kc, float *y, ptrdiff_t ldy,
                                                             int acc, const float *bias, int nv) {
    const __mmask16 m0 = nv >= 16 ? 0xffff : (__mmask16)((1u << nv) - 1);
    const __mmask16 m1 = nv >= 32 ? 0xffff : nv > 16 ? (__mmask16)((1u << (nv - 16)) - 1) : 0;
    __m512 c0[SJ_BF_MR], c1[SJ_BF_MR];
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        c0[r] = acc ? _mm512_maskz_loadu_ps(m0, y + r * ldy) : _mm512_setzero_ps();
        c1[r] = acc ? _mm512_maskz_loadu_ps(m1, y + r * ldy + 16) : _mm512_setzero_ps();
    }
    for (int i = 0; i < kc; i++, w += 32, xq += mr) {
        const __m512i b0 = _mm512_load_si512((const void *)w), b1 = _mm512_load_si512((const void *)(w + 16));
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++) {
            const __m512i a = _mm512_set1_epi32((int)xq[r]);
            c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)a, (__m512bh)b0);
            c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)a, (__m512bh)b1);
        }
    }
    const __m512 bb0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    const __m512 bb1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        _mm512_mask_storeu_ps(y + r * ldy, m0, bias ? _mm512_add_ps(c0[r], bb0) : c0[r]);
        _mm512_mask_storeu_ps(y + r * ldy + 16, m1, bias ? _mm512_add_ps(c1[r], bb1) : c1[r]);
    }
}

static void sj_bf_tile_rows(int mr, const uint32_t *xq, const uint32_t *w, int kc, float *y, ptrdiff_t ldy, int acc,
                            const float *bias, int nv) {
#define SJ_BF_CASE(R) case R: sj_bf_tile(R, xq, w, kc, y, ldy, acc, bias, nv); return;
    switch (mr) {
        SJ_BF_CASE(1) SJ_BF_CASE(2) SJ_BF_CASE(3) SJ_BF_CASE(4) SJ_BF_CASE(5) SJ_BF_CASE(6)
        SJ_BF_CASE(7) SJ_BF_CASE(8) SJ_BF_CASE(9) SJ_BF_CASE(10) SJ_BF_CASE(11) SJ_BF_CASE(12)
        SJ_BF_CASE(13) SJ_BF_CASE(14)
    }
#undef SJ_BF_CASE
}

/* sj_bf16_round_rows_base with vcvtne2ps2bf16 (the same numbers, checked on all 2^32 float32 values
   on Zen 4: it rounds to nearest even, reads subnormals as zero, quiets NaN as sj_bf16_round), 32
   values a step */
static void sj_bf16_round_rows_native(const float *x, ptrdiff_t ldx, int M, int K, uint32_t *xq) {
    const int K2 = (K + 1) / 2, nb = M > 0 ? sj_bf_nblocks(M) : 0;
    uint32_t t[16];
    for (int b = 0; b < nb; b++) {
        const int m0 = sj_bf_block_row(M, b), mr = sj_bf_block_row(M, b + 1) - m0;
        uint32_t *q = xq + (ptrdiff_t)m0 * K2;
        for (int r = 0; r < mr; r++) {
            const float *row = x + (m0 + r) * ldx;
            int i = 0;
            for (; 2 * i + 32 <= K; i += 16) {
                const __m512bh p = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 2 * i + 16), _mm512_loadu_ps(row + 2 * i));
                _mm512_storeu_si512((void *)t, (__m512i)p);
                for (int j = 0; j < 16; j++) q[(i + j) * mr + r] = t[j];
            }
            for (; i < K / 2; i++)
                q[i * mr + r] = (uint32_t)sj_bf16_round(row[2 * i]) | (uint32_t)sj_bf16_round(row[2 * i + 1]) << 16;
            if (K & 1)
                q[(K2 - 1) * mr + r] = sj_bf16_round(row[K - 1]);
        }
    }
}

/* Up to SJ_BF_WIDE_ROWS rows: y[r, 0:128] over four whole panels at once (w: the first, the others
   K2 * 32 apart), the chain over all K2 pairs: 8 chains a row where the 32-column tile has 2, so
   the few rows' dependent vdpbf16ps overlap (alone, 1 x 512 x 58101 streamed its weights at 0.6x
   the float32-arithmetic kernel's rate). The same chains, so the same numbers. */
#define SJ_BF_WIDE_ROWS 3
static inline __attribute__((always_inline)) void sj_bf_tile4(const int mr, const uint32_t *xq, const uint32_t *w,
                                                              int K2, float *y, ptrdiff_t ldy, const float *bias) {
    const ptrdiff_t ps = (ptrdiff_t)K2 * SJ_PANEL;
    __m512 c[SJ_BF_WIDE_ROWS][8];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < 8; v++) c[r][v] = _mm512_setzero_ps();
    for (int i = 0; i < K2; i++, w += 32, xq += mr) {
        __m512i b[8];
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) b[v] = _mm512_load_si512((const void *)(w + (v >> 1) * ps + (v & 1) * 16));
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512i a = _mm512_set1_epi32((int)xq[r]);
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++) c[r][v] = _mm512_dpbf16_ps(c[r][v], (__m512bh)a, (__m512bh)b[v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < 8; v++)
            _mm512_storeu_ps(y + r * ldy + v * 16, bias ? _mm512_add_ps(c[r][v], _mm512_loadu_ps(bias + v * 16)) : c[r][v]);
}

/* y[m, n] for m < M and the columns of pair panels [p0, p1) (see the top of this file) */
static void sj_bf16_rows_native(const uint32_t *xq, int M, int K2, const uint32_t *wp, int N, const float *bias,
                                float *y, ptrdiff_t ldy, int p0, int p1) {
    const int nb = sj_bf_nblocks(M);
    if (M <= SJ_BF_WIDE_ROWS)
        for (; p0 + 4 <= p1 && (p0 + 4) * SJ_PANEL <= N; p0 += 4) {
            const uint32_t *w = wp + (ptrdiff_t)p0 * K2 * SJ_PANEL;
            float *yp = y + p0 * SJ_PANEL;
            const float *bp = bias ? bias + p0 * SJ_PANEL : NULL;
            if (M == 1)
                sj_bf_tile4(1, xq, w, K2, yp, ldy, bp);
            else if (M == 2)
                sj_bf_tile4(2, xq, w, K2, yp, ldy, bp);
            else
                sj_bf_tile4(3, xq, w, K2, yp, ldy, bp);
        }
    for (int p = p0; p < p1; p++) {
        const int n = p * SJ_PANEL, nv = N - n < SJ_PANEL ? N - n : SJ_PANEL;
        const uint32_t *panel = wp + (ptrdiff_t)p * K2 * SJ_PANEL;
        for (int k0 = 0; k0 < K2 || k0 == 0; k0 += SJ_BF_KC) {
            const int kc = K2 - k0 < SJ_BF_KC ? K2 - k0 : SJ_BF_KC, last = k0 + kc >= K2;
            for (int b = 0; b < nb; b++) {
                const int m = sj_bf_block_row(M, b), mr = sj_bf_block_row(M, b + 1) - m;
                sj_bf_tile_rows(mr, xq + (ptrdiff_t)m * K2 + (ptrdiff_t)k0 * mr, panel + (ptrdiff_t)k0 * SJ_PANEL, kc,
                                y + m * ldy + n, ldy, k0 > 0, last && bias ? bias + n : NULL, nv);
            }
            if (K2 == 0)
                break;
        }
    }
}
#pragma GCC pop_options
#endif

/* set by _native_vm.bf16_native(False): the portable path even where vdpbf16ps runs (for tests) */
static int sj_bf16_native_off = 0;

/* 3 vdpbf16ps (AVX512-BF16 at the AVX-512 level), else the portable body at the half kernels' level
   (2 AVX-512, 1 AVX2, 0 baseline) */
static inline int sj_bf16_pick(void) {
    const int isa = sj_half_pick();
#if defined(__GNUC__) && defined(__x86_64__)
    if (isa == 2 && !sj_bf16_native_off && __builtin_cpu_supports("avx512bf16"))
        return 3;
#endif
    return isa;
}

static void sj_bf16_round_rows(const float *x, ptrdiff_t ldx, int M, int K, uint32_t *xq) {
#if defined(__GNUC__) && defined(__x86_64__)
    if (sj_bf16_pick() == 3) {
        sj_bf16_round_rows_native(x, ldx, M, K, xq);
        return;
    }
#endif
    sj_bf16_round_rows_base(x, ldx, M, K, xq);
}

static void sj_bf16_rows(const uint32_t *xq, int M, int K2, const uint32_t *wp, int N, const float *bias, float *y,
                         ptrdiff_t ldy, int p0, int p1) {
    if (M <= 0 || p0 >= p1)
        return;
#if defined(__GNUC__) && defined(__x86_64__)
    const int isa = sj_bf16_pick();
    if (isa == 3)
        sj_bf16_rows_native(xq, M, K2, wp, N, bias, y, ldy, p0, p1);
    else if (isa == 2)
        sj_bf16_rows_avx512(xq, M, K2, wp, N, bias, y, ldy, p0, p1);
    else if (isa == 1)
        sj_bf16_rows_avx2(xq, M, K2, wp, N, bias, y, ldy, p0, p1);
    else
#endif
        sj_bf16_rows_base(xq, M, K2, wp, N, bias, y, ldy, p0, p1);
}

#endif
