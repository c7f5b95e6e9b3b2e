/* Body of native_half.h, included once per instruction set with SJ_NAME(x) naming the variant. No
   include guard: that is the point. 16 lanes are held as SJ_HNVP native vectors of SJ_HNVL floats
   (one zmm with AVX-512, two ymm with AVX2, four xmm otherwise), summed lane for lane as
   native_gemv_body.h's dot / dot_nv sum them. */
#if defined(__AVX512F__)
#define SJ_HNVL 16
#elif defined(__AVX__)
#define SJ_HNVL 8
#else
#define SJ_HNVL 4
#endif
#define SJ_HNVP (SJ_LANES / SJ_HNVL)
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

/* the 16 lanes held in parts p[0..SJ_HNVP) summed as native_gemv_body.h's hsum */
static inline __attribute__((always_inline)) float SJ_NAME(hhsum)(const SJ_NAME(hv) *p) {
#if SJ_HNVL == 16
    sj_v16 a = p[0];
    sj_v8 h = __builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7) + __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15);
    sj_v4 q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#elif SJ_HNVL == 8
    sj_v8 h = p[0] + p[1];
    sj_v4 q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#else
    sj_v4 q = (p[0] + p[2]) + (p[1] + p[3]);
#endif
    sj_v4 t = q + __builtin_shufflevector(q, q, 2, 3, 2, 3);
    return t[0] + t[1];
}

/* dot(widen(w), x) over K, summed as native_gemv_body.h's dot: 16-lane block j into chain j % 4 (the
   last 1-3 blocks of kv into chains 0-2), (c0 + c1) + (c2 + c3), the halving tree, then the last
   K % 16 products in order */
static inline __attribute__((always_inline)) float SJ_NAME(hdot)(const uint16_t *w, const float *x, int K, int kv,
                                                                 int k4, const int bf) {
    SJ_NAME(hv) c[4][SJ_HNVP];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < SJ_HNVP; i++) c[j][i] = (SJ_NAME(hv)){0};
    int k = 0;
    for (; k < k4; k += 4 * SJ_LANES)
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < SJ_HNVP; i++) {
                const int o = k + j * SJ_LANES + i * SJ_HNVL;
                c[j][i] += SJ_NAME(hload)(w + o, bf) * *(const SJ_NAME(hvu) *)(x + o);
            }
    for (int j = 0; j < 3; j++)
        if (k + j * SJ_LANES < kv)
            for (int i = 0; i < SJ_HNVP; i++) {
                const int o = k + j * SJ_LANES + i * SJ_HNVL;
                c[j][i] += SJ_NAME(hload)(w + o, bf) * *(const SJ_NAME(hvu) *)(x + o);
            }
    SJ_NAME(hv) p[SJ_HNVP];
    for (int i = 0; i < SJ_HNVP; i++) p[i] = (c[0][i] + c[1][i]) + (c[2][i] + c[3][i]);
    float s = SJ_NAME(hhsum)(p);
    for (int q = kv; q < K; q++) s += sj_half_to_f32(w[q], bf) * x[q];
    return s;
}

/* the one-row kernel, for each of the M rows in turn: every weight row converted as it is read */
static inline __attribute__((always_inline)) void SJ_NAME(half_rows_direct)(
    const float *x, ptrdiff_t ldx, int M, const uint16_t *w, const int bf, int K, const float *bias, float *y,
    ptrdiff_t ldy, int n0, int n1) {
    const int kv = K - K % SJ_LANES;
    const int k4 = kv - kv % (4 * SJ_LANES);
    for (int n = n0; n < n1; n++) {
        const uint16_t *wr = w + (ptrdiff_t)n * K;
        const float b = bias ? bias[n] : 0.0f;
        for (int m = 0; m < M; m++) y[m * ldy + n] = SJ_NAME(hdot)(wr, x + m * ldx, K, kv, k4, bf) + b;
    }
}

/* rows r of w (K apart) widened into buf[r * K ...] for r < nr */
static void SJ_NAME(half_widen)(const uint16_t *w, int nr, int K, int bf, float *buf) {
    const ptrdiff_t n = (ptrdiff_t)nr * K, nv = n - n % SJ_HNVL;
    ptrdiff_t i = 0;
    for (; i < nv; i += SJ_HNVL) *(SJ_NAME(hvu) *)(buf + i) = SJ_NAME(hload)(w + i, bf);
    for (; i < n; i++) buf[i] = sj_half_to_f32(w[i], bf);
}

static inline __attribute__((always_inline)) void SJ_NAME(half_gemv_fmt)(
    const float *x, ptrdiff_t ldx, int M, const uint16_t *w, const int bf, int K, const float *bias, float *y,
    ptrdiff_t ldy, int n0, int n1) {
    /* one row of x: converted as read, when that sums as the widened path does (no K % 16 tail,
       whose products the compiler may round apart from their sums in one and fuse in the other) */
    if (K > SJ_HALF_BUF || K == 0 || (M == 1 && K % SJ_LANES == 0)) {
        SJ_NAME(half_rows_direct)(x, ldx, M, w, bf, K, bias, y, ldy, n0, n1);
        return;
    }
    float buf[SJ_HALF_BUF] __attribute__((aligned(64)));
    const int nb = SJ_HALF_BUF / K;
    for (int n = n0; n < n1; n += nb) {
        const int nr = n1 - n < nb ? n1 - n : nb;
        SJ_NAME(half_widen)(w + (ptrdiff_t)n * K, nr, K, bf, buf);
        for (int m = 0; m < M; m += SJ_HALF_MB)
            SJ_NAME(gemv_rows)(x + m * ldx, ldx, M - m < SJ_HALF_MB ? M - m : SJ_HALF_MB, buf, K,
                               bias ? bias + n : NULL, y + m * ldy + n, ldy, 0, nr);
    }
}

/* y[m, n] = dot(x[m, :], widen(W[n, :])) (+ bias[n]) for m < M, n in [n0, n1) (native_half.h) */
static void SJ_NAME(half_gemv)(const float *x, ptrdiff_t ldx, int M, const uint16_t *w, int bf, int K,
                               const float *bias, float *y, ptrdiff_t ldy, int n0, int n1) {
    if (bf)
        SJ_NAME(half_gemv_fmt)(x, ldx, M, w, 1, K, bias, y, ldy, n0, n1);
    else
        SJ_NAME(half_gemv_fmt)(x, ldx, M, w, 0, K, bias, y, ldy, n0, n1);
}

#undef SJ_HNVP
#undef SJ_HNVL
