/* Body of native_bf16dot.h's portable path, included once per instruction set with SJ_NAME(x)
   naming the variant (no include guard: that is the point): vdpbf16ps's chain without the
   instruction. Vectors of SJ_BNVL floats (a zmm with AVX-512, a ymm with AVX2, an xmm otherwise);
   a tile of SJ_BTR rows x 32 columns. Per pair, the high halves for every row of the tile, then the
   low halves: each output still adds x[2i+1] * w[2i+1] before x[2i] * w[2i]. */
#if defined(__AVX512F__)
#define SJ_BNVL 16
#define SJ_BTR 6
#elif defined(__AVX__)
#define SJ_BNVL 8
#define SJ_BTR 2
#else
#define SJ_BNVL 4
#define SJ_BTR 1
#endif
typedef float SJ_NAME(bv) __attribute__((vector_size(SJ_BNVL * 4)));
typedef float SJ_NAME(bvu) __attribute__((vector_size(SJ_BNVL * 4), aligned(4)));
typedef uint32_t SJ_NAME(bw) __attribute__((vector_size(SJ_BNVL * 4)));

static inline __attribute__((always_inline)) float SJ_NAME(bf_bits)(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* y[r, 0:nv] = the chain over K2 pairs of xq[i * ldq + r] (ldq: the rows of x's block) and the
   pair panel (+ bias), r < mr */
static inline __attribute__((always_inline)) void SJ_NAME(bf_tile)(const int mr, const uint32_t *xq, ptrdiff_t ldq,
                                                                   const uint32_t *w, int K2, float *y, ptrdiff_t ldy,
                                                                   const float *bias, int nv) {
    enum { NV = SJ_PANEL / SJ_BNVL };
    SJ_NAME(bv) c[SJ_BTR][NV];
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < NV; v++) c[r][v] = (SJ_NAME(bv)){0};
    for (int i = 0; i < K2; i++, w += SJ_PANEL) {
        SJ_NAME(bv) b[NV];
        for (int v = 0; v < NV; v++)
            b[v] = (SJ_NAME(bv))(*(const SJ_NAME(bw) *)(w + v * SJ_BNVL) & 0xffff0000u);
        for (int r = 0; r < mr; r++) {
            const float a = SJ_NAME(bf_bits)(xq[i * ldq + r] & 0xffff0000u);
            for (int v = 0; v < NV; v++) c[r][v] += a * b[v];
        }
        for (int v = 0; v < NV; v++)
            b[v] = (SJ_NAME(bv))(*(const SJ_NAME(bw) *)(w + v * SJ_BNVL) << 16);
        for (int r = 0; r < mr; r++) {
            const float a = SJ_NAME(bf_bits)(xq[i * ldq + r] << 16);
            for (int v = 0; v < NV; v++) c[r][v] += a * b[v];
        }
    }
    for (int r = 0; r < mr; r++) {
        float t[SJ_PANEL];
        for (int v = 0; v < NV; v++) *(SJ_NAME(bvu) *)(t + v * SJ_BNVL) = c[r][v];
        for (int j = 0; j < nv; j++) y[r * ldy + j] = bias ? t[j] + bias[j] : t[j];
    }
}

/* y[m, n] for m < M and the columns of pair panels [p0, p1) (native_bf16dot.h): x's row blocks in
   tiles of SJ_BTR rows */
static void SJ_NAME(bf16_rows)(const uint32_t *xq, int M, int K2, const uint32_t *wp, int N, const float *bias,
                               float *y, ptrdiff_t ldy, int p0, int p1) {
    const int nb = sj_bf_nblocks(M);
    for (int p = p0; p < p1; p++) {
        const int n = p * SJ_PANEL, nv = N - n < SJ_PANEL ? N - n : SJ_PANEL;
        const uint32_t *panel = wp + (ptrdiff_t)p * K2 * SJ_PANEL;
        const float *bn = bias ? bias + n : NULL;
        for (int b = 0; b < nb; b++) {
            const int m0 = sj_bf_block_row(M, b), mr = sj_bf_block_row(M, b + 1) - m0;
            const uint32_t *xb = xq + (ptrdiff_t)m0 * K2;
            int r = 0;
#define SJ_BF_T(R) SJ_NAME(bf_tile)(R, xb + r, mr, panel, K2, y + (m0 + r) * ldy + n, ldy, bn, nv)
            for (; r + SJ_BTR <= mr; r += SJ_BTR)
                SJ_BF_T(SJ_BTR);
            switch (mr - r) { /* the last 1 .. SJ_BTR - 1 rows, a constant tile each */
#if SJ_BTR > 5
            case 5: SJ_BF_T(5); break;
            case 4: SJ_BF_T(4); break;
            case 3: SJ_BF_T(3); break;
            case 2: SJ_BF_T(2); break;
#endif
#if SJ_BTR > 1
            case 1: SJ_BF_T(1); break;
#endif
            default: break;
            }
#undef SJ_BF_T
        }
    }
}

#undef SJ_BNVL
#undef SJ_BTR
