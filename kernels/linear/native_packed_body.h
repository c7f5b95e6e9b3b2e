/* Body of native_packed.h, included once per instruction set with SJ_NAME(x) naming the variant.
   No include guard: that is the point. The tile follows the registers the variant has: 16-float
   vectors and 12 rows with AVX-512 (32 registers), 8 floats and 6 rows with AVX2 (16), 4 floats
   and 6 rows otherwise (16 SSE registers). */
#if defined(__AVX512F__)
#define SJ_PK_VL 16
#define SJ_PK_MR 12
#elif defined(__AVX2__)
#define SJ_PK_VL 8
#define SJ_PK_MR 6
#else
#define SJ_PK_VL 4
#define SJ_PK_MR 6
#endif
#define SJ_PK_TW (2 * SJ_PK_VL) /* columns of a tile */
/* The next panel is prefetched into L2 (locality hint 2: prefetcht1) while this one is computed,
   each row block a share of it, spread over its k loop: without it the first row block waited on
   memory and the others on nothing, so streaming and arithmetic did not overlap (the next panel
   rather than 1 KB ahead, and L2 rather than L1). The k loop runs in groups of SJ_PK_KG steps, unrolled,
   the share's lines for a group spread over its steps by tests on the unrolled step's constant
   index: the earlier loop that issued "the lines reached by this k" branched unpredictably and cost
   a share of the arithmetic even with everything in L1. Measurements of this header's choices:
   benchmarks/RESULTS.md, "Figures moved out of docstrings". */
#define SJ_PK_HINT 2
#define SJ_PK_KG 8
/* k rows of a panel chunk taken by every row block in turn: 256 x 128 B = 32 KB, in L1 (48 KB)
   with one row block's x (faster than 128 k rows from memory at 64 rows, level at 16). */
#ifndef SJ_PK_KL1
#define SJ_PK_KL1 256
#endif

typedef float SJ_NAME(pk_v) __attribute__((vector_size(SJ_PK_VL * 4)));
typedef float SJ_NAME(pk_vu) __attribute__((vector_size(SJ_PK_VL * 4), aligned(4)));

/* c[r, 0:TW] (ldc apart) = (acc ? c[r, :] : 0) + sum over k < kc of x[r, k] * b[k, 0:TW] (x[r, k] at
   x[k * mr + r] when packed, else at x[r * ldx + k]; b rows SJ_PANEL apart) for r < mr, + bias[0:TW]
   when bias: mr accumulator pairs, one pair of b vectors per k. Inlined with a constant mr, so the
   accumulators are registers. pfb (when not NULL): the start of this tile's share of the next
   panel, prefetched pfn lines (at most 2 * SJ_PK_KG) per group of SJ_PK_KG k, one or two a step. */
static inline __attribute__((always_inline)) void SJ_NAME(pk_tile)(
    const int mr, const int packed, const float *x, ptrdiff_t ldx, const float *b, int kc, float *c,
    ptrdiff_t ldc, int acc, const float *bias, const float *pfb, int pfn) {
    SJ_NAME(pk_v) c0[SJ_PK_MR], c1[SJ_PK_MR];
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        if (acc) {
            c0[r] = *(const SJ_NAME(pk_vu) *)(c + r * ldc);
            c1[r] = *(const SJ_NAME(pk_vu) *)(c + r * ldc + SJ_PK_VL);
        } else {
            c0[r] = (SJ_NAME(pk_v)){0};
            c1[r] = (SJ_NAME(pk_v)){0};
        }
    }
    const float *pf = pfb; /* the share's first line not yet prefetched */
    int k = 0;
    if (pfb)
        for (; k + SJ_PK_KG <= kc; k += SJ_PK_KG, pf += 16 * pfn) {
#pragma GCC unroll 8
            for (int kg = 0; kg < SJ_PK_KG; kg++, b += SJ_PANEL, x += packed ? mr : 1) {
                const SJ_NAME(pk_v) b0 = *(const SJ_NAME(pk_v) *)b, b1 = *(const SJ_NAME(pk_v) *)(b + SJ_PK_VL);
                if (kg < pfn) /* kg is a constant in each unrolled step, pfn fixed for the call */
                    __builtin_prefetch(pf + 16 * kg, 0, SJ_PK_HINT);
                if (kg + SJ_PK_KG < pfn)
                    __builtin_prefetch(pf + 16 * (kg + SJ_PK_KG), 0, SJ_PK_HINT);
#pragma GCC unroll 16
                for (int r = 0; r < mr; r++) {
                    const float a = packed ? x[r] : x[r * ldx];
                    c0[r] += a * b0;
                    c1[r] += a * b1;
                }
            }
        }
    for (; k < kc; k++, b += SJ_PANEL, x += packed ? mr : 1) { /* the rest, or all without prefetch */
        const SJ_NAME(pk_v) b0 = *(const SJ_NAME(pk_v) *)b, b1 = *(const SJ_NAME(pk_v) *)(b + SJ_PK_VL);
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++) {
            const float a = packed ? x[r] : x[r * ldx];
            c0[r] += a * b0;
            c1[r] += a * b1;
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        if (bias) {
            c0[r] += *(const SJ_NAME(pk_vu) *)bias;
            c1[r] += *(const SJ_NAME(pk_vu) *)(bias + SJ_PK_VL);
        }
        *(SJ_NAME(pk_vu) *)(c + r * ldc) = c0[r];
        *(SJ_NAME(pk_vu) *)(c + r * ldc + SJ_PK_VL) = c1[r];
    }
}

/* pk_tile with mr a run-time value in [1, SJ_PK_MR] and x packed or not (ldx < 0: packed): one
   inlined copy per row count and form */
static void SJ_NAME(pk_tile_rows)(int mr, const float *x, ptrdiff_t ldx, const float *b, int kc, float *c,
                                  ptrdiff_t ldc, int acc, const float *bias, const float *pfb, int pfn) {
#define SJ_PK_CASE(R)                                                                    \
    case R:                                                                              \
        if (ldx < 0)                                                                     \
            SJ_NAME(pk_tile)(R, 1, x, 0, b, kc, c, ldc, acc, bias, pfb, pfn);            \
        else                                                                             \
            SJ_NAME(pk_tile)(R, 0, x, ldx, b, kc, c, ldc, acc, bias, pfb, pfn);          \
        return;
    switch (mr) {
        SJ_PK_CASE(1) SJ_PK_CASE(2) SJ_PK_CASE(3) SJ_PK_CASE(4) SJ_PK_CASE(5) SJ_PK_CASE(6)
#if SJ_PK_MR > 6
        SJ_PK_CASE(7) SJ_PK_CASE(8) SJ_PK_CASE(9) SJ_PK_CASE(10) SJ_PK_CASE(11) SJ_PK_CASE(12)
#endif
    }
#undef SJ_PK_CASE
}

/* A tile whose columns run past N (the last panel: nv < TW valid): computed into a scratch tile
   holding y's valid columns (or zeros) and copied back, bias added to the valid columns only. */
static void SJ_NAME(pk_tile_edge)(int mr, const float *x, ptrdiff_t ldx, const float *b, int kc, float *c,
                                  ptrdiff_t ldc, int acc, const float *bias, int nv) {
    float t[SJ_PK_MR * SJ_PK_TW];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < SJ_PK_TW; j++) t[r * SJ_PK_TW + j] = acc && j < nv ? c[r * ldc + j] : 0.0f;
    SJ_NAME(pk_tile_rows)(mr, x, ldx, b, kc, t, SJ_PK_TW, 1, NULL, NULL, 0);
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nv; j++) c[r * ldc + j] = t[r * SJ_PK_TW + j] + (bias ? bias[j] : 0.0f);
}

/* x[r, k] (rows ldx apart) for r < mr, k < kc into xp[k * mr + r]: what pk_tile reads */
static void SJ_NAME(pk_pack_x)(const float *x, ptrdiff_t ldx, int mr, int kc, float *xp) {
    for (int k = 0; k < kc; k++)
        for (int r = 0; r < mr; r++)
            xp[k * mr + r] = x[r * ldx + k];
}

/* y[m, n] = x[m, :] . W[n, :] (+ bias[n]) for the columns of panels [p0, p1) of packed W (see
   native_packed.h): K in blocks (one block up to SJ_PACK_KMAX_UNCUT), then panel by panel, each
   panel's tiles over every row block while the panel is in cache. From SJ_PK_PACK_MIN_ROWS rows
   and a share of W of at least 2 MB (panels x K >= SJ_PK_PACK_KPANELS), x is packed per K block
   first (every row block's share side by side, in the thread's scratch): strided rows of x cost
   more as they grow, while below SJ_PK_PACK_MIN_ROWS the copy, a pass with no arithmetic, weighs
   more than it saves. Without scratch, one row block at a time, K in
   blocks of at most SJ_PK_KSTACK, packed on the stack. The sums are the same in every case: each
   output's FMA chain runs over k in order whatever the blocks, its partial sums kept in y between
   them. */
#define SJ_PK_KSTACK 256
#ifndef SJ_PK_PACK_KPANELS
#define SJ_PK_PACK_KPANELS 16384 /* panels x K: 2 MB of W */
#endif
#ifndef SJ_PK_PACK_MIN_ROWS
#define SJ_PK_PACK_MIN_ROWS 72
#endif
static void SJ_NAME(packed_rows)(const float *x, ptrdiff_t ldx, int M, const float *wp, int K, int N,
                                 const float *bias, float *y, ptrdiff_t ldy, int p0, int p1) {
    if (M <= 0 || p0 >= p1)
        return;
    const int nblocks = (M + SJ_PK_MR - 1) / SJ_PK_MR;
    const int base = M / nblocks, extra = M % nblocks;  /* the first `extra` blocks get base + 1 rows */
    int nk = K <= SJ_PACK_KMAX_UNCUT ? 1 : (K + SJ_PACK_KC - 1) / SJ_PACK_KC;
    int kcut = (K + nk - 1) / nk;
    const int pack = M >= SJ_PK_PACK_MIN_ROWS && (ptrdiff_t)(p1 - p0) * K >= SJ_PK_PACK_KPANELS; /* several row blocks */
    float stack_xp[SJ_PK_MR * SJ_PK_KSTACK];
    float *xp = pack ? sj_pk_scratch((size_t)M * kcut) : NULL;
    int group = nblocks;
    if (pack && !xp) {
        xp = stack_xp, group = 1;
        if (kcut > SJ_PK_KSTACK)
            nk = (K + SJ_PK_KSTACK - 1) / SJ_PK_KSTACK, kcut = (K + nk - 1) / nk;
    }
    const ptrdiff_t xl = pack ? -1 : ldx; /* pk_tile_rows' ldx: < 0 for packed x */
    for (int g0 = 0; g0 < nblocks; g0 += group) {
        const int g1 = g0 + group < nblocks ? g0 + group : nblocks;
        const int mg = g0 * base + (g0 < extra ? g0 : extra); /* first row of the group */
        for (int k0 = 0; k0 < K || k0 == 0; k0 += kcut) {
            const int kc = K - k0 < kcut ? K - k0 : kcut, first = k0 == 0, last = k0 + kc >= K;
            if (pack)
                for (int i = g0, m = mg; i < g1; m += base + (i < extra), i++)
                    SJ_NAME(pk_pack_x)(x + m * ldx + k0, ldx, base + (i < extra), kc, xp + (ptrdiff_t)(m - mg) * kc);
            /* x of row block i (first row m) from k0 + kk, as pk_tile_rows reads it */
#define SJ_PK_X(m, mr, kk) (pack ? xp + (ptrdiff_t)((m) - mg) * kc + (ptrdiff_t)(kk) * (mr) : x + (m) * ldx + k0 + (kk))
            for (int p = p0; p < p1; p++) {
                const float *panel = wp + ((ptrdiff_t)p * K + k0) * SJ_PANEL;
                /* the panel computed next: this K block's next one, else the next K block's first
                   (without it, each K block of a cut K began waiting on memory), else none */
                const float *next = p + 1 < p1 ? panel + (ptrdiff_t)K * SJ_PANEL
                                    : !last  ? wp + ((ptrdiff_t)p0 * K + k0 + kc) * SJ_PANEL
                                             : NULL;
                for (int s = 0; s < SJ_PANEL; s += SJ_PK_TW) {
                    const int n = p * SJ_PANEL + s, nv = N - n < SJ_PK_TW ? N - n : SJ_PK_TW;
                    if (nv <= 0)
                        break;
                    const float *bn = last && bias ? bias + n : NULL;
                    if (nv < SJ_PK_TW) {
                        for (int i = g0, m = mg; i < g1; m += base + (i < extra), i++)
                            SJ_NAME(pk_tile_edge)(base + (i < extra), SJ_PK_X(m, base + (i < extra), 0), xl,
                                                  panel + s, kc, y + m * ldy + n, ldy, !first, bn, nv);
                        continue;
                    }
                    /* k in chunks of SJ_PK_KL1 when there are several row blocks: every block takes
                       a chunk while it is in L1, so the panel streams in once, evenly over the
                       tile's time */
                    const int kl = g1 - g0 > 1 ? SJ_PK_KL1 : kc;
                    for (int kk = 0; kk < kc; kk += kl) {
                        const int kn = kc - kk < kl ? kc - kk : kl, end = kk + kn == kc;
                        /* the next panel's chunk is prefetched while this one is computed: each
                           row block a share (cshare floats), pfn lines per group of SJ_PK_KG k */
                        const ptrdiff_t cshare = (ptrdiff_t)kn * SJ_PANEL / (g1 - g0);
                        const int pfn = (int)(((cshare + 15) / 16 * SJ_PK_KG + kn - 1) / kn);
                        for (int i = g0, m = mg; i < g1; m += base + (i < extra), i++) {
                            const int mr = base + (i < extra);
                            const float *pfb = s == 0 && next ? next + (ptrdiff_t)kk * SJ_PANEL + (i - g0) * cshare : NULL;
                            SJ_NAME(pk_tile_rows)(mr, SJ_PK_X(m, mr, kk), xl, panel + s + (ptrdiff_t)kk * SJ_PANEL,
                                                  kn, y + m * ldy + n, ldy, !first || kk > 0, end ? bn : NULL,
                                                  pfb, pfn);
                        }
                    }
                }
            }
#undef SJ_PK_X
            if (K == 0)
                break;
        }
    }
}

#undef SJ_PK_VL
#undef SJ_PK_MR
#undef SJ_PK_TW
#undef SJ_PK_HINT
#undef SJ_PK_KG
#undef SJ_PK_KSTACK
