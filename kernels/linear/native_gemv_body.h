/* Body of native_gemv.h, included once per instruction set with SJ_NAME(x) naming the variant.
   No include guard: that is the point. */

/* lanes of a 16-float accumulator summed by halving (shuffles and vector adds, no stores) */
static inline float SJ_NAME(hsum)(sj_v16 a) {
    sj_v8 h = __builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7) + __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15);
    sj_v4 q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
    sj_v4 p = q + __builtin_shufflevector(q, q, 2, 3, 2, 3);  /* (q0 + q2, q1 + q3, ...) */
    return p[0] + p[1];
}

/* the first k4 (a multiple of 64) products of dot(w, x): 16-lane blocks in turn into the four
   accumulators c[0..3] (four FMA chains: two could not hide the FMA latency with W in cache) */
static inline void SJ_NAME(dot_quads)(const float *w, const float *x, int k4, sj_v16 c[4]) {
    sj_v16 a = c[0], b = c[1], d = c[2], e = c[3];
    for (int k = 0; k < k4; k += 4 * SJ_LANES) {
        a += *(const sj_v16u *)(w + k) * *(const sj_v16u *)(x + k);
        b += *(const sj_v16u *)(w + k + SJ_LANES) * *(const sj_v16u *)(x + k + SJ_LANES);
        d += *(const sj_v16u *)(w + k + 2 * SJ_LANES) * *(const sj_v16u *)(x + k + 2 * SJ_LANES);
        e += *(const sj_v16u *)(w + k + 3 * SJ_LANES) * *(const sj_v16u *)(x + k + 3 * SJ_LANES);
    }
    c[0] = a; c[1] = b; c[2] = d; c[3] = e;
}

/* dot(w, x) over K as every out_in kernel sums it: 16-lane blocks in turn into four accumulators
   (block j into j % 4: four FMA chains; the last 1-3 blocks of kv into the first ones), reduced as
   (c0 + c1) + (c2 + c3) then by halving, then the last K % 16 products in order (kv = K - K % 16) */
static inline float SJ_NAME(dot)(const float *w, const float *x, int K, int kv) {
    sj_v16 c[4] = {{0}, {0}, {0}, {0}};
    const int k4 = kv - kv % (4 * SJ_LANES);
    SJ_NAME(dot_quads)(w, x, k4, c);
    for (int k = k4, j = 0; k < kv; k += SJ_LANES, j++)
        c[j] += *(const sj_v16u *)(w + k) * *(const sj_v16u *)(x + k);
    float s = SJ_NAME(hsum)((c[0] + c[1]) + (c[2] + c[3]));
    for (int k = kv; k < K; k++) s += w[k] * x[k];
    return s;
}

/* s[r] = dot(x, W[r, :]) for R (2 or 4, a constant once inlined) rows of W, K apart, summed as
   SJ_NAME(dot) does: one x load for R FMAs */
static inline __attribute__((always_inline)) void SJ_NAME(dots)(const float *xr, const float *w0, int K, int kv,
                                                                int k4, int R, float *s) {
    sj_v16 c[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++) c[r][j] = (sj_v16){0};
    int k = 0;
    for (; k < k4; k += 4 * SJ_LANES)
        for (int j = 0; j < 4; j++) {
            sj_v16 xv = *(const sj_v16u *)(xr + k + j * SJ_LANES);
            for (int r = 0; r < R; r++) c[r][j] += *(const sj_v16u *)(w0 + (ptrdiff_t)r * K + k + j * SJ_LANES) * xv;
        }
    for (int j = 0; k < kv; k += SJ_LANES, j++) {
        sj_v16 xv = *(const sj_v16u *)(xr + k);
        for (int r = 0; r < R; r++) c[r][j] += *(const sj_v16u *)(w0 + (ptrdiff_t)r * K + k) * xv;
    }
    for (int r = 0; r < R; r++) {
        const float *wr = w0 + (ptrdiff_t)r * K;
        float t = SJ_NAME(hsum)((c[r][0] + c[r][1]) + (c[r][2] + c[r][3]));
        for (int q = kv; q < K; q++) t += wr[q] * xr[q];
        s[r] = t;
    }
}

#ifdef __AVX512F__
/* y[m, n] = dot(x[m, :], W[n, :]) (+ bias[n]) for W "out_in" [N, K], columns [n0, n1). One row of
   x reads two rows of W at a time (8 accumulators: four FMA chains each, one x load for two FMAs);
   2-4 rows read four rows of W at a time with AVX-512 (16 accumulators of its 32 registers), two
   elsewhere, each reused for every x row; an odd last column alone. Every output is summed as
   SJ_NAME(dot) sums it, so a row's result does not depend on the rows beside it. (One row of W at
   a time with two chains was slower than BLAS; four rows interleaved at one x row defeated the
   L2-to-L1 prefetch: benchmarks/RESULTS.md, "Figures moved out of docstrings".) */
static void SJ_NAME(gemv_rows)(const float *x, ptrdiff_t ldx, int M, const float *w, int K,
                               const float *bias, float *y, ptrdiff_t ldy, int n0, int n1) {
    const int kv = K - K % SJ_LANES;
    const int k4 = kv - kv % (4 * SJ_LANES);
    int n = n0;
    float s[4];
#ifdef __AVX512F__
    /* 2-4 rows of x with 32 registers: four rows of W at a time (16 accumulators), the same sums */
    if (M > 1)
        for (; n + 4 <= n1; n += 4) {
            const float *w0 = w + (ptrdiff_t)n * K;
            for (int m = 0; m < M; m++) {
                SJ_NAME(dots)(x + m * ldx, w0, K, kv, k4, 4, s);
                float *yr = y + m * ldy + n;
                for (int r = 0; r < 4; r++) yr[r] = s[r] + (bias ? bias[n + r] : 0.0f);
            }
        }
#endif
    for (; n + 2 <= n1; n += 2) {
        const float *w0 = w + (ptrdiff_t)n * K;
        for (int m = 0; m < M; m++) {
            SJ_NAME(dots)(x + m * ldx, w0, K, kv, k4, 2, s);
            float *yr = y + m * ldy + n;
            yr[0] = s[0] + (bias ? bias[n] : 0.0f);
            yr[1] = s[1] + (bias ? bias[n + 1] : 0.0f);
        }
    }
    for (; n < n1; n++)
        for (int m = 0; m < M; m++)
            y[m * ldy + n] = SJ_NAME(dot)(w + (ptrdiff_t)n * K, x + m * ldx, K, kv) + (bias ? bias[n] : 0.0f);
}
#else
/* Without AVX-512, 16 lanes are held as 16 / SJ_NVL native vectors (two ymm with AVX2, four xmm
   otherwise): GCC lowers a 64-byte vector that the target cannot hold through the stack and general
   registers (vpinsrq round trips: AVX2 ran a one-row product slower than SSE2). The sums are the
   16-lane ones to the bit: block j into chain j % 4 lane by lane, (c0 + c1) + (c2 + c3), then the
   same halving tree. One row of W at a time (four chains of 16 lanes fill 8 of the 16 registers). */
#ifdef __AVX__
#define SJ_NVL 8
#else
#define SJ_NVL 4
#endif
#define SJ_NVP (SJ_LANES / SJ_NVL)
typedef float SJ_NAME(vn) __attribute__((vector_size(SJ_NVL * 4)));
typedef float SJ_NAME(vnu) __attribute__((vector_size(SJ_NVL * 4), aligned(4)));

/* SJ_NAME(hsum) of the 16 lanes held in parts p[0..SJ_NVP) */
static inline __attribute__((always_inline)) float SJ_NAME(hsum_parts)(const SJ_NAME(vn) *p) {
#if SJ_NVL == 8
    sj_v8 h = p[0] + p[1];
    sj_v4 q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#else
    sj_v4 q = (p[0] + p[2]) + (p[1] + p[3]);
#endif
    sj_v4 t = q + __builtin_shufflevector(q, q, 2, 3, 2, 3);
    return t[0] + t[1];
}

/* dot(w, x) summed as SJ_NAME(dot) sums it (see there), in native vectors */
static inline __attribute__((always_inline)) float SJ_NAME(dot_nv)(const float *w, const float *x, int K,
                                                                   int kv, int k4) {
    SJ_NAME(vn) c[4][SJ_NVP];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < SJ_NVP; i++) c[j][i] = (SJ_NAME(vn)){0};
    int k = 0;
    for (; k < k4; k += 4 * SJ_LANES)
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < SJ_NVP; i++) {
                const int o = k + j * SJ_LANES + i * SJ_NVL;
                c[j][i] += *(const SJ_NAME(vnu) *)(w + o) * *(const SJ_NAME(vnu) *)(x + o);
            }
    for (int j = 0; j < 3; j++)  /* the last 1-3 blocks into chains 0-2, constant indices */
        if (k + j * SJ_LANES < kv)
            for (int i = 0; i < SJ_NVP; i++) {
                const int o = k + j * SJ_LANES + i * SJ_NVL;
                c[j][i] += *(const SJ_NAME(vnu) *)(w + o) * *(const SJ_NAME(vnu) *)(x + o);
            }
    SJ_NAME(vn) p[SJ_NVP];
    for (int i = 0; i < SJ_NVP; i++) p[i] = (c[0][i] + c[1][i]) + (c[2][i] + c[3][i]);
    float s = SJ_NAME(hsum_parts)(p);
    for (int q = kv; q < K; q++) s += w[q] * x[q];
    return s;
}

/* y[m, n] = dot(x[m, :], W[n, :]) (+ bias[n]) for W "out_in" [N, K], columns [n0, n1): each row of
   W against the 1-4 rows of x in turn (the W row stays in L1 between them) */
static void SJ_NAME(gemv_rows)(const float *x, ptrdiff_t ldx, int M, const float *w, int K,
                               const float *bias, float *y, ptrdiff_t ldy, int n0, int n1) {
    const int kv = K - K % SJ_LANES;
    const int k4 = kv - kv % (4 * SJ_LANES);
    for (int n = n0; n < n1; n++) {
        const float *wr = w + (ptrdiff_t)n * K;
        const float b = bias ? bias[n] : 0.0f;
        for (int m = 0; m < M; m++) y[m * ldy + n] = SJ_NAME(dot_nv)(wr, x + m * ldx, K, kv, k4) + b;
    }
}
#undef SJ_NVP
#undef SJ_NVL
#endif

#ifdef __AVX512F__
/* 4 rows of y (x0..x3; only the first mr stored) = x @ W (+ bias) for W "in_out" [K, N],
   columns [n0, n1): 32 columns in 8 vector accumulators, one broadcast x value and two W vectors
   per k (no horizontal sums); then 16-column blocks, then single columns at the right edge. */
static void SJ_NAME(in_out_rows4)(const float *x0, const float *x1, const float *x2, const float *x3,
                                  const float *w, int K, int N, const float *bias, float *y, ptrdiff_t ldy,
                                  int n0, int n1, int mr) {
    int n = n0;
    for (; n + 32 <= n1; n += 32) {
        sj_v16 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
        const float *wk = w + n;
        for (int k = 0; k < K; k++, wk += N) {
            sj_v16 b0 = *(const sj_v16u *)wk, b1 = *(const sj_v16u *)(wk + 16);
            float a0 = x0[k], a1 = x1[k], a2 = x2[k], a3 = x3[k];
            c00 += a0 * b0; c01 += a0 * b1; c10 += a1 * b0; c11 += a1 * b1;
            c20 += a2 * b0; c21 += a2 * b1; c30 += a3 * b0; c31 += a3 * b1;
        }
        if (bias) {
            sj_v16 d0 = *(const sj_v16u *)(bias + n), d1 = *(const sj_v16u *)(bias + n + 16);
            c00 += d0; c01 += d1; c10 += d0; c11 += d1; c20 += d0; c21 += d1; c30 += d0; c31 += d1;
        }
        float *y0 = y + n;
        *(sj_v16u *)y0 = c00; *(sj_v16u *)(y0 + 16) = c01;
        if (mr > 1) { *(sj_v16u *)(y0 + ldy) = c10; *(sj_v16u *)(y0 + ldy + 16) = c11; }
        if (mr > 2) { *(sj_v16u *)(y0 + 2 * ldy) = c20; *(sj_v16u *)(y0 + 2 * ldy + 16) = c21; }
        if (mr > 3) { *(sj_v16u *)(y0 + 3 * ldy) = c30; *(sj_v16u *)(y0 + 3 * ldy + 16) = c31; }
    }
    for (; n + 16 <= n1; n += 16) {
        sj_v16 c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
        const float *wk = w + n;
        for (int k = 0; k < K; k++, wk += N) {
            sj_v16 b0 = *(const sj_v16u *)wk;
            c0 += x0[k] * b0; c1 += x1[k] * b0; c2 += x2[k] * b0; c3 += x3[k] * b0;
        }
        if (bias) {
            sj_v16 d0 = *(const sj_v16u *)(bias + n);
            c0 += d0; c1 += d0; c2 += d0; c3 += d0;
        }
        float *y0 = y + n;
        *(sj_v16u *)y0 = c0;
        if (mr > 1) *(sj_v16u *)(y0 + ldy) = c1;
        if (mr > 2) *(sj_v16u *)(y0 + 2 * ldy) = c2;
        if (mr > 3) *(sj_v16u *)(y0 + 3 * ldy) = c3;
    }
    if (n < n1 && N >= 16 && K >= 1) {
        /* the last 1-15 columns as one vector block: for k < K - 1 the load runs on into row k + 1 of
           W (in bounds; those lanes are not stored), row K - 1 is loaded lane by lane */
        const int nt = n1 - n;
        sj_v16 c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
        const float *wk = w + n;
        for (int k = 0; k < K - 1; k++, wk += N) {
            sj_v16 b0 = *(const sj_v16u *)wk;
            c0 += x0[k] * b0; c1 += x1[k] * b0; c2 += x2[k] * b0; c3 += x3[k] * b0;
        }
        sj_v16 b0 = {0};
        for (int j = 0; j < nt; j++) b0[j] = wk[j];
        c0 += x0[K - 1] * b0; c1 += x1[K - 1] * b0; c2 += x2[K - 1] * b0; c3 += x3[K - 1] * b0;
        for (int j = 0; j < nt; j++) {
            float d = bias ? bias[n + j] : 0.0f;
            float *y0 = y + n + j;
            y0[0] = c0[j] + d;
            if (mr > 1) y0[ldy] = c1[j] + d;
            if (mr > 2) y0[2 * ldy] = c2[j] + d;
            if (mr > 3) y0[3 * ldy] = c3[j] + d;
        }
        return;
    }
    for (; n < n1; n++) {
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int k = 0; k < K; k++) {
            float b0 = w[(ptrdiff_t)k * N + n];
            s0 += x0[k] * b0; s1 += x1[k] * b0; s2 += x2[k] * b0; s3 += x3[k] * b0;
        }
        float d = bias ? bias[n] : 0.0f;
        float *y0 = y + n;
        y0[0] = s0 + d;
        if (mr > 1) y0[ldy] = s1 + d;
        if (mr > 2) y0[2 * ldy] = s2 + d;
        if (mr > 3) y0[3 * ldy] = s3 + d;
    }
}

/* R rows of y (the first mr stored), columns [n0, n1) with n1 - n0 a multiple of 32: 2R vector
   accumulators (R rows x 32 columns), two W vectors per k for 2R FMAs (the 4-row kernel is bound by
   its loads). The rows are first copied k-major into xt [K][R] (rows past mr repeat row 0, not
   stored), so the R broadcasts of a k come from one or two cache lines. The same sums in the same
   order as in_out_rows4. Instantiated for R = 6, 8, 10, 12 (12: 24 accumulators + 2 W vectors of
   the 32 AVX-512 registers); a block of 9-10 rows costs a 10-row pass, not 8 + 4. */
#define SJ_IN_OUT_ROWS(R)                                                                                   \
static void SJ_NAME(in_out_rows##R)(const float *x, ptrdiff_t ldx, int mr, const float *w, int K, int N,   \
                                    const float *bias, float *y, ptrdiff_t ldy, int n0, int n1, float *xt) { \
    for (int r = 0; r < R; r++) {                                                                           \
        const float *xr = x + (r < mr ? r : 0) * ldx;                                                       \
        for (int k = 0; k < K; k++) xt[k * R + r] = xr[k];                                                  \
    }                                                                                                       \
    for (int n = n0; n + 32 <= n1; n += 32) {                                                               \
        sj_v16 c[R][2];                                                                                     \
        for (int r = 0; r < R; r++) { c[r][0] = (sj_v16){0}; c[r][1] = (sj_v16){0}; }                       \
        const float *wk = w + n;                                                                            \
        const float *xk = xt;                                                                               \
        for (int k = 0; k < K; k++, wk += N, xk += R) {                                                     \
            sj_v16 b0 = *(const sj_v16u *)wk, b1 = *(const sj_v16u *)(wk + 16);                             \
            for (int r = 0; r < R; r++) {                                                                   \
                float a = xk[r];                                                                            \
                c[r][0] += a * b0;                                                                          \
                c[r][1] += a * b1;                                                                          \
            }                                                                                               \
        }                                                                                                   \
        for (int r = 0; r < mr; r++) {                                                                      \
            if (bias) { c[r][0] += *(const sj_v16u *)(bias + n); c[r][1] += *(const sj_v16u *)(bias + n + 16); } \
            *(sj_v16u *)(y + r * ldy + n) = c[r][0];                                                        \
            *(sj_v16u *)(y + r * ldy + n + 16) = c[r][1];                                                   \
        }                                                                                                   \
    }                                                                                                       \
}
SJ_IN_OUT_ROWS(6)
SJ_IN_OUT_ROWS(8)
SJ_IN_OUT_ROWS(10)
SJ_IN_OUT_ROWS(12)
#undef SJ_IN_OUT_ROWS

/* y[m, n] = sum_k x[m, k] * W[k, n] (+ bias[n]) for W "in_out" [K, N]: blocks of up to 12 rows over
   the 32-column blocks (a last block of 5-11 rows takes the smallest of the 6/8/10/12-row kernels
   that holds it), 4 rows at a time elsewhere (a last block of 1-3 rows reads row m in place of the
   missing ones and stores only its own rows, so the weight is read once per block of rows). */
static void SJ_NAME(gemv_rows_in_out)(const float *x, ptrdiff_t ldx, int M, const float *w, int K, int N,
                                      const float *bias, float *y, ptrdiff_t ldy, int n0, int n1) {
    int m = 0;
    const int n32 = n0 + (n1 - n0) / 32 * 32;
    if (M > 4 && K <= SJ_PACK_MAX_K && n32 > n0) {
        float xt[12 * SJ_PACK_MAX_K];
        for (; M - m > 4; ) {
            const int mr = M - m < 12 ? M - m : 12;
            const float *x0 = x + m * ldx;
            float *y0 = y + m * ldy;
            if (mr > 10) SJ_NAME(in_out_rows12)(x0, ldx, mr, w, K, N, bias, y0, ldy, n0, n32, xt);
            else if (mr > 8) SJ_NAME(in_out_rows10)(x0, ldx, mr, w, K, N, bias, y0, ldy, n0, n32, xt);
            else if (mr > 6) SJ_NAME(in_out_rows8)(x0, ldx, mr, w, K, N, bias, y0, ldy, n0, n32, xt);
            else SJ_NAME(in_out_rows6)(x0, ldx, mr, w, K, N, bias, y0, ldy, n0, n32, xt);
            for (int h = 0; h < mr && n32 < n1; h += 4) {
                const int hr = mr - h < 4 ? mr - h : 4;
                const float *xh = x0 + h * ldx;
                SJ_NAME(in_out_rows4)(xh, hr > 1 ? xh + ldx : xh, hr > 2 ? xh + 2 * ldx : xh, hr > 3 ? xh + 3 * ldx : xh,
                                      w, K, N, bias, y0 + h * ldy, ldy, n32, n1, hr);
            }
            m += mr;
        }
    }
    for (; m < M; m += 4) {
        const int mr = M - m < 4 ? M - m : 4;
        const float *x0 = x + m * ldx;
        SJ_NAME(in_out_rows4)(x0, mr > 1 ? x0 + ldx : x0, mr > 2 ? x0 + 2 * ldx : x0, mr > 3 ? x0 + 3 * ldx : x0,
                              w, K, N, bias, y + m * ldy, ldy, n0, n1, mr);
    }
}
#else
/* Without AVX-512 (see gemv_rows above): tiles of up to 6 rows x 2 native vectors of columns (12
   accumulators of the 16 registers, two W loads and a broadcast per k), then one vector, then single
   columns. Every output is one multiply-add chain over k in order plus the bias, as in the AVX-512
   kernels, so the results do not depend on the tiling (nor on the rows beside a row). */
#ifdef __AVX__
#define SJ_NVL 8
#else
#define SJ_NVL 4
#endif
typedef float SJ_NAME(wn) __attribute__((vector_size(SJ_NVL * 4)));
typedef float SJ_NAME(wnu) __attribute__((vector_size(SJ_NVL * 4), aligned(4)));

/* R rows (xr[0..R)) of y, columns [n0, n1) */
static inline __attribute__((always_inline)) void SJ_NAME(in_out_tile)(const float *const *xr, int R, const float *w,
                                                                       int K, int N, const float *bias, float *y,
                                                                       ptrdiff_t ldy, int n0, int n1) {
    int n = n0;
    for (; n + 2 * SJ_NVL <= n1; n += 2 * SJ_NVL) {
        SJ_NAME(wn) c[6][2];
        for (int r = 0; r < R; r++) { c[r][0] = (SJ_NAME(wn)){0}; c[r][1] = (SJ_NAME(wn)){0}; }
        const float *wk = w + n;
        for (int k = 0; k < K; k++, wk += N) {
            SJ_NAME(wn) b0 = *(const SJ_NAME(wnu) *)wk, b1 = *(const SJ_NAME(wnu) *)(wk + SJ_NVL);
            for (int r = 0; r < R; r++) {
                const float a = xr[r][k];
                c[r][0] += a * b0;
                c[r][1] += a * b1;
            }
        }
        for (int r = 0; r < R; r++) {
            if (bias) { c[r][0] += *(const SJ_NAME(wnu) *)(bias + n); c[r][1] += *(const SJ_NAME(wnu) *)(bias + n + SJ_NVL); }
            *(SJ_NAME(wnu) *)(y + r * ldy + n) = c[r][0];
            *(SJ_NAME(wnu) *)(y + r * ldy + n + SJ_NVL) = c[r][1];
        }
    }
    for (; n + SJ_NVL <= n1; n += SJ_NVL) {
        SJ_NAME(wn) c[6];
        for (int r = 0; r < R; r++) c[r] = (SJ_NAME(wn)){0};
        const float *wk = w + n;
        for (int k = 0; k < K; k++, wk += N) {
            SJ_NAME(wn) b0 = *(const SJ_NAME(wnu) *)wk;
            for (int r = 0; r < R; r++) c[r] += xr[r][k] * b0;
        }
        for (int r = 0; r < R; r++) {
            if (bias) c[r] += *(const SJ_NAME(wnu) *)(bias + n);
            *(SJ_NAME(wnu) *)(y + r * ldy + n) = c[r];
        }
    }
    for (; n < n1; n++) {
        float s[6];
        for (int r = 0; r < R; r++) s[r] = 0.0f;
        for (int k = 0; k < K; k++) {
            const float b0 = w[(ptrdiff_t)k * N + n];
            for (int r = 0; r < R; r++) s[r] += xr[r][k] * b0;
        }
        const float d = bias ? bias[n] : 0.0f;
        for (int r = 0; r < R; r++) y[r * ldy + n] = s[r] + d;
    }
}

/* y[m, n] = sum_k x[m, k] * W[k, n] (+ bias[n]) for W "in_out" [K, N]: the columns in blocks of
   about 256 KB of W (kept in L2 while every block of 6 rows passes over it), the last block of 1-5
   rows by its own tile */
static void SJ_NAME(gemv_rows_in_out)(const float *x, ptrdiff_t ldx, int M, const float *w, int K, int N,
                                      const float *bias, float *y, ptrdiff_t ldy, int n0, int n1) {
    int nb = K > 0 ? (65536 / K) & ~(2 * SJ_NVL - 1) : n1 - n0;
    if (nb < 2 * SJ_NVL || M <= 6) nb = n1 - n0 > 0 ? n1 - n0 : 1;
    for (int c0 = n0; c0 < n1; c0 += nb) {
        const int c1 = n1 - c0 < nb ? n1 : c0 + nb;
        for (int m = 0; m < M; m += 6) {
            const int mr = M - m < 6 ? M - m : 6;
            const float *xr[6];
            for (int r = 0; r < mr; r++) xr[r] = x + (m + r) * ldx;
            float *ym = y + m * ldy;
            switch (mr) {
                case 6: SJ_NAME(in_out_tile)(xr, 6, w, K, N, bias, ym, ldy, c0, c1); break;
                case 5: SJ_NAME(in_out_tile)(xr, 5, w, K, N, bias, ym, ldy, c0, c1); break;
                case 4: SJ_NAME(in_out_tile)(xr, 4, w, K, N, bias, ym, ldy, c0, c1); break;
                case 3: SJ_NAME(in_out_tile)(xr, 3, w, K, N, bias, ym, ldy, c0, c1); break;
                case 2: SJ_NAME(in_out_tile)(xr, 2, w, K, N, bias, ym, ldy, c0, c1); break;
                default: SJ_NAME(in_out_tile)(xr, 1, w, K, N, bias, ym, ldy, c0, c1); break;
            }
        }
    }
}
#undef SJ_NVL
#endif
