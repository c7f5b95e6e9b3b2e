/* Body of native_half.h, included once per instruction set with SJ_NAME(x) naming the variant. No
   include guard: that is the point. Native vectors of SJ_HNVL floats: a zmm with AVX-512, a ymm with
   AVX2, an xmm otherwise. */
/* SJ_HTR: rows of the direct tile (accumulators for SJ_HTR x 32 columns plus one converted panel row
   in the registers, and the broadcast x: 6 x 2 + 2 + 1 of 32 zmm, 2 x 4 + 4 + 1 of 16 ymm (3 rows
   spill, and were slower), 1 x 8 + 8 + 1 xmm) */
#if defined(__AVX512F__)
#define SJ_HNVL 16
#define SJ_HTR 6
#elif defined(__AVX__)
#define SJ_HNVL 8
#define SJ_HTR 2
#else
#define SJ_HNVL 4
#define SJ_HTR 1
#endif
typedef float SJ_NAME(hv) __attribute__((vector_size(SJ_HNVL * 4)));
typedef float SJ_NAME(hvu) __attribute__((vector_size(SJ_HNVL * 4), aligned(4)));

/* SJ_HNVL 16-bit values at w widened to float32 (bf: bfloat16, else IEEE fp16) */
static inline __attribute__((always_inline)) SJ_NAME(hv) SJ_NAME(hload)(const uint16_t *w, const int bf) {
#if SJ_HNVL == 16
    const __m256i h = _mm256_loadu_si256((const __m256i *)w);
    if (bf)
        return (SJ_NAME(hv))_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return (SJ_NAME(hv))_mm512_cvtph_ps(h);
#elif SJ_HNVL == 8
    const __m128i h = _mm_loadu_si128((const __m128i *)w);
    if (bf)
        return (SJ_NAME(hv))_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return (SJ_NAME(hv))_mm256_cvtph_ps(h);
#else
#if defined(__SSE2__)
    if (bf)
        return (SJ_NAME(hv))_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64((const __m128i *)w)));
#endif
    SJ_NAME(hv) v;
    for (int i = 0; i < 4; i++) v[i] = sj_half_to_f32(w[i], bf);
    return v;
#endif
}

/* SJ_PANEL (32) columns of y for rows x[r] (r < mr, rows ldx apart) over one panel of packed 16-bit
   weights (K rows of 32 values, k-major): per k, the panel row converted in registers and one x
   value broadcast per row, each output one FMA chain over k in order from zero, bias added last:
   the sums of native_packed_body.h's pk_tile, so this equals the packed float32 kernel on the
   widened panel bit for bit. Only the first nv columns are stored. */
static inline __attribute__((always_inline)) void SJ_NAME(half_tile)(const int mr, const float *x, ptrdiff_t ldx,
                                                                     const uint16_t *wp, const int bf, int K,
                                                                     const float *bias, float *y, ptrdiff_t ldy, int nv) {
    enum { NV = SJ_PANEL / SJ_HNVL };
    SJ_NAME(hv) c[SJ_HTR][NV];
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < NV; v++) c[r][v] = (SJ_NAME(hv)){0};
    for (int k = 0; k < K; k++, wp += SJ_PANEL) {
        SJ_NAME(hv) b[NV];
        for (int v = 0; v < NV; v++) b[v] = SJ_NAME(hload)(wp + v * SJ_HNVL, bf);
        for (int r = 0; r < mr; r++) {
            const float a = x[r * ldx + k];
            for (int v = 0; v < NV; v++) c[r][v] += a * b[v];
        }
    }
    for (int r = 0; r < mr; r++) {
        float t[SJ_PANEL];
        for (int v = 0; v < NV; v++) *(SJ_NAME(hvu) *)(t + v * SJ_HNVL) = c[r][v];
        for (int j = 0; j < nv; j++) y[r * ldy + j] = bias ? t[j] + bias[j] : t[j];
    }
}

static inline __attribute__((always_inline)) void SJ_NAME(half_direct)(
    const float *x, ptrdiff_t ldx, int M, const uint16_t *wp, const int bf, int K, int N, const float *bias, float *y,
    ptrdiff_t ldy, int p0, int p1) {
    for (int p = p0; p < p1; p++) {
        const int n = p * SJ_PANEL, nv = N - n < SJ_PANEL ? N - n : SJ_PANEL;
        const uint16_t *panel = wp + (ptrdiff_t)p * K * SJ_PANEL;
        const float *bn = bias ? bias + n : NULL;
        int m = 0;
        for (; m + SJ_HTR <= M; m += SJ_HTR)
            SJ_NAME(half_tile)(SJ_HTR, x + m * ldx, ldx, panel, bf, K, bn, y + m * ldy + n, ldy, nv);
        switch (M - m) { /* the last 1 .. SJ_HTR - 1 rows, a constant tile each */
#if SJ_HTR > 5
        case 5: SJ_NAME(half_tile)(5, x + m * ldx, ldx, panel, bf, K, bn, y + m * ldy + n, ldy, nv); break;
        case 4: SJ_NAME(half_tile)(4, x + m * ldx, ldx, panel, bf, K, bn, y + m * ldy + n, ldy, nv); break;
        case 3: SJ_NAME(half_tile)(3, x + m * ldx, ldx, panel, bf, K, bn, y + m * ldy + n, ldy, nv); break;
#endif
#if SJ_HTR > 2
        case 2: SJ_NAME(half_tile)(2, x + m * ldx, ldx, panel, bf, K, bn, y + m * ldy + n, ldy, nv); break;
#endif
#if SJ_HTR > 1
        case 1: SJ_NAME(half_tile)(1, x + m * ldx, ldx, panel, bf, K, bn, y + m * ldy + n, ldy, nv); break;
#endif
        default: break;
        }
    }
}

/* n values at w widened into buf */
static void SJ_NAME(half_widen)(const uint16_t *w, ptrdiff_t n, int bf, float *buf) {
    const ptrdiff_t nv = n - n % SJ_HNVL;
    ptrdiff_t i = 0;
    if (bf)
        for (; i < nv; i += SJ_HNVL) *(SJ_NAME(hvu) *)(buf + i) = SJ_NAME(hload)(w + i, 1);
    else
        for (; i < nv; i += SJ_HNVL) *(SJ_NAME(hvu) *)(buf + i) = SJ_NAME(hload)(w + i, 0);
    for (; i < n; i++) buf[i] = sj_half_to_f32(w[i], bf);
}

/* y[m, n] = dot(x[m, :], widen(W[n, :])) (+ bias[n]) for m < M and the columns of panels [p0, p1) of
   the packed 16-bit W (native_half.h) */
static void SJ_NAME(half_packed)(const float *x, ptrdiff_t ldx, int M, const uint16_t *wp, int bf, int K, int N,
                                 const float *bias, float *y, ptrdiff_t ldy, int p0, int p1) {
    if (M <= 0 || p0 >= p1)
        return;
    float *buf = M > (bf ? SJ_HALF_DIRECT_BF16 : SJ_HALF_DIRECT) && K > 0 ? sj_half_scratch((size_t)K * SJ_PANEL) : NULL;
    if (!buf) {
        if (bf)
            SJ_NAME(half_direct)(x, ldx, M, wp, 1, K, N, bias, y, ldy, p0, p1);
        else
            SJ_NAME(half_direct)(x, ldx, M, wp, 0, K, N, bias, y, ldy, p0, p1);
        return;
    }
    for (int p = p0; p < p1; p++) {
        const int n = p * SJ_PANEL, nv = N - n < SJ_PANEL ? N - n : SJ_PANEL;
        SJ_NAME(half_widen)(wp + (ptrdiff_t)p * K * SJ_PANEL, (ptrdiff_t)K * SJ_PANEL, bf, buf);
        SJ_NAME(packed_rows)(x, ldx, M, buf, K, nv, bias ? bias + n : NULL, y + n, ldy, 0, 1);
    }
}

#undef SJ_HNVL
#undef SJ_HTR
