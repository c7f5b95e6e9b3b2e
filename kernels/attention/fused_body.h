/* Body of attention/fused.h, compiled once per instruction set (_sj_isa_variants.h) with SJ_NAME(x)
   naming the variant. No include guard: that is the point. Vectors follow the registers the variant
   has: 16 floats and 12-row tiles with AVX-512 (24 of 32 zmm accumulators), 8 floats and 6 rows with
   AVX2 + FMA, 4 floats and 6 rows otherwise (12 of 16 registers). */
#if defined(__AVX512F__)
#define SJ_FA_VL 16
#define SJ_FA_MR 12
#elif defined(__AVX2__)
#define SJ_FA_VL 8
#define SJ_FA_MR 6
#else
#define SJ_FA_VL 4
#define SJ_FA_MR 6
#endif
#define SJ_FA_TW (2 * SJ_FA_VL) /* keys of a score tile, columns of an output tile */

typedef float SJ_NAME(fa_v) __attribute__((vector_size(SJ_FA_VL * 4)));
typedef int SJ_NAME(fa_vi) __attribute__((vector_size(SJ_FA_VL * 4)));
typedef float SJ_NAME(fa_vu) __attribute__((vector_size(SJ_FA_VL * 4), aligned(4)));
#define SJ_FA_V SJ_NAME(fa_v)
#define SJ_FA_VI SJ_NAME(fa_vi)
#define SJ_FA_LOAD(p) (*(const SJ_NAME(fa_vu) *)(p))
#define SJ_FA_STORE(p, x) (*(SJ_NAME(fa_vu) *)(p) = (x))

/* mask ? a : b, lane by lane (mask lanes all ones or all zeros, as comparisons give) */
static inline __attribute__((always_inline)) SJ_FA_V SJ_NAME(fa_sel)(SJ_FA_VI mask, SJ_FA_V a, SJ_FA_V b) {
    return (SJ_FA_V)(((SJ_FA_VI)a & mask) | ((SJ_FA_VI)b & ~mask));
}

/* 2**x for x <= 0: the scalar sj_exp2f of cython_cpu.pyx lane by lane (n = round(x) by the
   1.5 * 2**23 trick, Cephes' degree-6 polynomial on f = x - n, < 1 ulp; clamped below at -125) */
static inline __attribute__((always_inline)) SJ_FA_V SJ_NAME(fa_exp2)(SJ_FA_V x) {
    const SJ_FA_V lo = (SJ_FA_V){0} - 125.0f, magic = (SJ_FA_V){0} + 12582912.0f;
    x = SJ_NAME(fa_sel)(x < lo, lo, x);
    SJ_FA_V t = x + magic;
    SJ_FA_V f = x - (t - magic);
    SJ_FA_V p = 1.535336188319500e-4f * f + 1.339887440266574e-3f;
    p = p * f + 9.618437357674640e-3f;
    p = p * f + 5.550332471162809e-2f;
    p = p * f + 2.402264791363012e-1f;
    p = p * f + 6.931472028550421e-1f;
    p = p * f + 1.0f;
    SJ_FA_VI bits = ((SJ_FA_VI)t - (SJ_FA_VI)magic + 127) << 23;
    return p * (SJ_FA_V)bits;
}

/* s[r, 0:TW] (lds apart) = sum over d < D of qs[r * D + d] * kt[d * TW + 0:TW], r < MR: MR pairs of
   accumulators, one pair of key vectors loaded and one query value broadcast per row and d */
static inline __attribute__((always_inline)) void SJ_NAME(fa_qk)(const float *qs, int D, const float *kt,
                                                                  float *s, int lds) {
    SJ_FA_V c0[SJ_FA_MR], c1[SJ_FA_MR];
#pragma GCC unroll 12
    for (int r = 0; r < SJ_FA_MR; r++) c0[r] = c1[r] = (SJ_FA_V){0};
    for (int d = 0; d < D; d++) {
        const SJ_FA_V b0 = SJ_FA_LOAD(kt + d * SJ_FA_TW), b1 = SJ_FA_LOAD(kt + d * SJ_FA_TW + SJ_FA_VL);
#pragma GCC unroll 12
        for (int r = 0; r < SJ_FA_MR; r++) {
            const float a = qs[r * D + d];
            c0[r] += a * b0;
            c1[r] += a * b1;
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < SJ_FA_MR; r++) {
        SJ_FA_STORE(s + r * lds, c0[r]);
        SJ_FA_STORE(s + r * lds + SJ_FA_VL, c1[r]);
    }
}

/* o[r, c:c+W] (ldo apart) = alpha[r] * o[r, c:c+W] + sum over j < n of p[r * ldp + j] * v[j * ldv + c:c+W],
   r < MR, W = NV vectors (1 or 2) */
static inline __attribute__((always_inline)) void SJ_NAME(fa_pv)(const int nv, const float *p, int ldp,
                                                                  const float *v, int ldv, int n, float *o,
                                                                  int ldo, const float *alpha) {
    SJ_FA_V c0[SJ_FA_MR], c1[SJ_FA_MR];
#pragma GCC unroll 12
    for (int r = 0; r < SJ_FA_MR; r++) {
        c0[r] = alpha[r] * SJ_FA_LOAD(o + r * ldo);
        c1[r] = nv > 1 ? alpha[r] * SJ_FA_LOAD(o + r * ldo + SJ_FA_VL) : (SJ_FA_V){0};
    }
    for (int j = 0; j < n; j++) {
        const SJ_FA_V b0 = SJ_FA_LOAD(v + j * ldv);
        const SJ_FA_V b1 = nv > 1 ? SJ_FA_LOAD(v + j * ldv + SJ_FA_VL) : (SJ_FA_V){0};
#pragma GCC unroll 12
        for (int r = 0; r < SJ_FA_MR; r++) {
            const float a = p[r * ldp + j];
            c0[r] += a * b0;
            if (nv > 1)
                c1[r] += a * b1;
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < SJ_FA_MR; r++) {
        SJ_FA_STORE(o + r * ldo, c0[r]);
        if (nv > 1)
            SJ_FA_STORE(o + r * ldo + SJ_FA_VL, c1[r]);
    }
}

/* The online-softmax step of one tile row over a key block: row[0:np] holds base-2 scores, keys
   [0, nv) visible (nv >= 1). row becomes the unnormalised weights (0 past nv); the running max *m
   and sum *l are updated; returns the rescale of the row's accumulator. np is a multiple of VL. */
static inline __attribute__((always_inline)) float SJ_NAME(fa_softmax)(float *row, int np, int nv,
                                                                        float *m, float *l) {
    const SJ_FA_V ninf = (SJ_FA_V){0} - INFINITY;
    SJ_FA_VI iota;
    for (int e = 0; e < SJ_FA_VL; e++) iota[e] = e;
    SJ_FA_V mx = ninf;
    if (nv == np) {
        for (int c = 0; c < np; c += SJ_FA_VL) {
            SJ_FA_V x = SJ_FA_LOAD(row + c);
            mx = SJ_NAME(fa_sel)(x > mx, x, mx);
        }
    } else {
        for (int c = 0; c < np; c += SJ_FA_VL) {
            SJ_FA_V x = SJ_FA_LOAD(row + c);
            mx = SJ_NAME(fa_sel)((iota + c < nv) & (x > mx), x, mx);
        }
    }
    float bmax = mx[0];
    for (int e = 1; e < SJ_FA_VL; e++) bmax = mx[e] > bmax ? mx[e] : bmax;
    const float mold = *m, mnew = bmax > mold ? bmax : mold;
    float alpha = 1.0f;
    if (mnew > mold) /* mold -inf (nothing seen yet): the accumulator and sum are 0, alpha 0 */
        alpha = mold == -INFINITY ? 0.0f : SJ_NAME(fa_exp2)((SJ_FA_V){0} + (mold - mnew))[0];
    const SJ_FA_V mv = (SJ_FA_V){0} + mnew;
    SJ_FA_V sum = (SJ_FA_V){0};
    if (nv == np) {
        for (int c = 0; c < np; c += SJ_FA_VL) {
            SJ_FA_V e = SJ_NAME(fa_exp2)(SJ_FA_LOAD(row + c) - mv);
            SJ_FA_STORE(row + c, e);
            sum += e;
        }
    } else {
        for (int c = 0; c < np; c += SJ_FA_VL) {
            SJ_FA_V e = SJ_NAME(fa_sel)(iota + c < nv, SJ_NAME(fa_exp2)(SJ_FA_LOAD(row + c) - mv), (SJ_FA_V){0});
            SJ_FA_STORE(row + c, e);
            sum += e;
        }
    }
    float total = 0.0f;
    for (int e = 0; e < SJ_FA_VL; e++) total += sum[e];
    *l = *l * alpha + total;
    *m = mnew;
    return alpha;
}

/* One work item of fused.h's sj_fa_block (see there for the arguments). */
static void SJ_NAME(fa_block)(const float *q, const float *k, const float *v, float *o, int m, int D,
                              int Dv, int64_t lenb, int causal, int64_t first, float qscale, float *scratch) {
    const int mt = (m + SJ_FA_MR - 1) / SJ_FA_MR * SJ_FA_MR; /* rows padded to whole tiles */
    float *kt = scratch;                                     /* D x NB: the key block, packed */
    float *qs = kt + (ptrdiff_t)D * SJ_FA_NB;                /* QB x D: the scaled queries */
    float *ob = qs + (ptrdiff_t)SJ_FA_QB * D;                /* QB x Dv: the accumulators */
    float *sb = ob + (ptrdiff_t)SJ_FA_QB * Dv;               /* MR x NB: a tile's scores */
    float *mrow = sb + SJ_FA_MRMAX * SJ_FA_NB, *lrow = mrow + SJ_FA_QB;
    float alpha[SJ_FA_MR];
    int nvis[SJ_FA_QB];
    int last = 0;
    for (int r = 0; r < mt; r++) {
        int64_t nv = 0;
        if (r < m) {
            nv = lenb;
            if (causal && first + r + 1 < nv)
                nv = first + r + 1;
            nv = nv > 0 ? nv : 0;
        }
        nvis[r] = (int)nv;
        last = nvis[r] > last ? nvis[r] : last;
        mrow[r] = -INFINITY;
        lrow[r] = 0.0f;
        for (int d = 0; d < D; d++) qs[(ptrdiff_t)r * D + d] = r < m ? q[(ptrdiff_t)r * D + d] * qscale : 0.0f;
        for (int d = 0; d < Dv; d++) ob[(ptrdiff_t)r * Dv + d] = 0.0f;
    }
    for (int j0 = 0; j0 < last; j0 += SJ_FA_NB) {
        const int n = last - j0 < SJ_FA_NB ? last - j0 : SJ_FA_NB;
        const int np = (n + SJ_FA_TW - 1) / SJ_FA_TW * SJ_FA_TW;
        /* kt[p][d][0:TW] = k[j0 + p * TW + 0:TW, d], zero past n */
        for (int j = 0; j < np; j++) {
            float *dst = kt + (ptrdiff_t)(j / SJ_FA_TW) * D * SJ_FA_TW + j % SJ_FA_TW;
            if (j < n) {
                const float *kr = k + (ptrdiff_t)(j0 + j) * D;
                for (int d = 0; d < D; d++) dst[d * SJ_FA_TW] = kr[d];
            } else {
                for (int d = 0; d < D; d++) dst[d * SJ_FA_TW] = 0.0f;
            }
        }
        const float *vb = v + (ptrdiff_t)j0 * Dv;
        for (int t0 = 0; t0 < mt; t0 += SJ_FA_MR) {
            int tmax = 0;
            for (int r = 0; r < SJ_FA_MR; r++) tmax = nvis[t0 + r] > tmax ? nvis[t0 + r] : tmax;
            if (tmax <= j0)
                continue; /* no row of the tile sees a key of this block (nor of any later one) */
            for (int p = 0; p < np; p += SJ_FA_TW)
                SJ_NAME(fa_qk)(qs + (ptrdiff_t)t0 * D, D, kt + (ptrdiff_t)p * D, sb + p, SJ_FA_NB);
            for (int r = 0; r < SJ_FA_MR; r++) {
                int nv = nvis[t0 + r] - j0;
                nv = nv < n ? nv : n;
                if (nv <= 0) { /* nothing visible in this block: weights 0, accumulator unchanged */
                    for (int j = 0; j < np; j++) sb[r * SJ_FA_NB + j] = 0.0f;
                    alpha[r] = 1.0f;
                    continue;
                }
                alpha[r] = SJ_NAME(fa_softmax)(sb + r * SJ_FA_NB, np, nv, mrow + t0 + r, lrow + t0 + r);
            }
            float *ot = ob + (ptrdiff_t)t0 * Dv;
            int c = 0;
            for (; c + SJ_FA_TW <= Dv; c += SJ_FA_TW)
                SJ_NAME(fa_pv)(2, sb, SJ_FA_NB, vb + c, Dv, n, ot + c, Dv, alpha);
            for (; c + SJ_FA_VL <= Dv; c += SJ_FA_VL)
                SJ_NAME(fa_pv)(1, sb, SJ_FA_NB, vb + c, Dv, n, ot + c, Dv, alpha);
            for (; c < Dv; c++)
                for (int r = 0; r < SJ_FA_MR; r++) {
                    float acc = alpha[r] * ot[r * Dv + c];
                    for (int j = 0; j < n; j++) acc += sb[r * SJ_FA_NB + j] * vb[(ptrdiff_t)j * Dv + c];
                    ot[r * Dv + c] = acc;
                }
        }
    }
    for (int r = 0; r < m; r++) {
        const float inv = lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f;
        for (int d = 0; d < Dv; d++) o[(ptrdiff_t)r * Dv + d] = ob[(ptrdiff_t)r * Dv + d] * inv;
    }
}

#undef SJ_FA_VL
#undef SJ_FA_MR
#undef SJ_FA_TW
#undef SJ_FA_V
#undef SJ_FA_VI
#undef SJ_FA_LOAD
#undef SJ_FA_STORE
