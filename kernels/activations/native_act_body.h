/* Body of native_act.h, compiled once per instruction set with SJ_NAME(x) naming the variant.
   No include guard: that is the point. The formulas and constants are those of kernels/_vecmath.pxi
   (Cephes exp, tanh, Abramowitz & Stegun erf), written with selects instead of branches so each
   row loop vectorises. */

static inline float SJ_NAME(bits)(int b) { float f; __builtin_memcpy(&f, &b, 4); return f; }

static inline float SJ_NAME(exp)(float x) {
    float xc = x < -87.3365447504f ? -87.3365447504f : x;
    xc = xc > 88.7228391117f ? 88.7228391117f : xc;
    const float magic = 12582912.0f;
    float n = (xc * 1.44269504088896341f + magic) - magic;
    float f = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float z = f * f;
    float p = (((((1.9875691500e-4f * f + 1.3981999507e-3f) * f + 8.3334519073e-3f) * f + 4.1665795894e-2f) * f
                + 1.6666665459e-1f) * f + 5.0000001201e-1f) * z + f + 1.0f;
    float r = p * SJ_NAME(bits)(((int)n + 127) << 23);
    return x < -87.3365447504f ? 0.0f : r;
}

static inline float SJ_NAME(tanh)(float x) {
    float a = x >= 0 ? x : -x;
    float e = SJ_NAME(exp)(-2.0f * a);
    float big = (1.0f - e) / (1.0f + e);
    float z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z + -5.37397155531e-2f) * z
                    + 1.33314422036e-1f) * z + -3.33332819422e-1f) * z * a + a;
    float r = a < 0.625f ? small : big;
    return x < 0 ? -r : r;
}

static inline float SJ_NAME(erf)(float x) {
    float a = x >= 0 ? x : -x;
    float z = a * a;
    float small = ((((((7.853861353153693e-5f * z + -8.010193625184903e-4f) * z + 5.188327685732524e-3f) * z
                      + -2.685381193529856e-2f) * z + 1.128358514861418e-1f) * z + -3.761262582423300e-1f) * z
                   + 1.128379165726710f) * a;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float poly = ((((1.061405429f * t + -1.453152027f) * t + 1.421413741f) * t + -0.284496736f) * t + 0.254829592f) * t;
    float big = 1.0f - poly * SJ_NAME(exp)(-z);
    float r = a < 1.0f ? small : big;
    return x < 0 ? -r : r;
}

static inline float SJ_NAME(sigmoid)(float x) { return 1.0f / (1.0f + SJ_NAME(exp)(-x)); }

/* dst[i] = act(src[i] (+ bias[i])) for the codes of kernels/activations/spec.py; dst may be src */
static void SJ_NAME(act_row)(const float *src, const float *bias, float *dst, ptrdiff_t n, int code) {
    ptrdiff_t i;
#define SJ_ACT_LOOP(EXPR) \
    if (bias) { for (i = 0; i < n; i++) { float v = src[i] + bias[i]; dst[i] = (EXPR); } } \
    else { for (i = 0; i < n; i++) { float v = src[i]; dst[i] = (EXPR); } }
    switch (code) {
    case 1: SJ_ACT_LOOP(v < 0 ? 0.0f : v); break;
    case 2: SJ_ACT_LOOP(0.5f * v * (1.0f + SJ_NAME(erf)(v * 0.7071067811865476f))); break;
    case 3: SJ_ACT_LOOP(0.5f * v * (1.0f + SJ_NAME(tanh)(0.7978845608028654f * (v + 0.044715f * v * v * v)))); break;
    case 4: SJ_ACT_LOOP(v * SJ_NAME(sigmoid)(v)); break;
    case 5: SJ_ACT_LOOP(SJ_NAME(tanh)(v)); break;
    default: SJ_ACT_LOOP(v); break;
    }
#undef SJ_ACT_LOOP
}

/* One GRU row: xr = [r | z | n] input projections (read only: a row of a projected-embedding table
   serves as is), hr the hidden ones (n part of W_hh h + b_hh; overwritten: the gates go there), h
   the previous state; out = h' (reference.gru_gates) */
static void SJ_NAME(gru_gates_row)(const float *xr, float *hr, const float *h, float *out, int H) {
    for (int j = 0; j < 2 * H; j++) hr[j] = SJ_NAME(sigmoid)(xr[j] + hr[j]);
    const float *rg = hr, *zg = hr + H, *xn = xr + 2 * (ptrdiff_t)H;
    float *ng = hr + 2 * (ptrdiff_t)H;
    for (int j = 0; j < H; j++) ng[j] = SJ_NAME(tanh)(xn[j] + rg[j] * ng[j]);
    for (int j = 0; j < H; j++) out[j] = (1.0f - zg[j]) * ng[j] + zg[j] * h[j];
}

/* One LSTM row: xr = [i | f | g | o] input projections (read only), hr the hidden ones (overwritten:
   the gates go there) (reference.lstm_gates); c_out may be c. The gates by base pointer: with
   -fwrapv (Python's build flags) an index like 3 * H + j is not known to be affine, and the last
   loop ran scalar. */
static void SJ_NAME(lstm_gates_row)(const float *xr, float *hr, const float *c, float *h_out, float *c_out, int H) {
    float *ig = hr, *fg = hr + H, *gg = hr + 2 * (ptrdiff_t)H, *og = hr + 3 * (ptrdiff_t)H;
    for (int j = 0; j < 4 * H; j++) hr[j] = xr[j] + hr[j];
    for (int j = 0; j < 2 * H; j++) hr[j] = SJ_NAME(sigmoid)(hr[j]);
    for (int j = 0; j < H; j++) gg[j] = SJ_NAME(tanh)(gg[j]);
    for (int j = 0; j < H; j++) og[j] = SJ_NAME(sigmoid)(og[j]);
    for (int j = 0; j < H; j++) c_out[j] = fg[j] * c[j] + ig[j] * gg[j];
    for (int j = 0; j < H; j++) h_out[j] = og[j] * SJ_NAME(tanh)(c_out[j]);
}

/* softmax of s[0:n] * scale in place (the native attention's row: scale, max, exp, normalise) */
static void SJ_NAME(softmax_row)(float *s, int n, float scale) {
    float top = -3.4e38f;
    for (int j = 0; j < n; j++) s[j] *= scale;
    for (int j = 0; j < n; j++) top = s[j] > top ? s[j] : top;
    for (int j = 0; j < n; j++) s[j] = SJ_NAME(exp)(s[j] - top);
    float total = 0.0f;
    for (int j = 0; j < n; j++) total += s[j];
    const float inv = 1.0f / total;
    for (int j = 0; j < n; j++) s[j] *= inv;
}

/* sum of exp(s[i] - top) over s[0:n] in float64, over 8 independent lanes (log_softmax_f32, lse_f32) */
static inline __attribute__((always_inline)) double SJ_NAME(sum_exp_f64)(const float *s, ptrdiff_t n, float top) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    /* blocks of 128: 16 float lanes of 8 terms each, then into the float64 lanes (a float64 add per
       term, the conversion with it, cost more than the exp) */
    const ptrdiff_t nb = n - n % 128;
    for (ptrdiff_t i = 0; i < nb; i += 128) {
        float part[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        for (ptrdiff_t ii = i; ii < i + 128; ii += 16)
            for (int j = 0; j < 16; j++) part[j] += SJ_NAME(exp)(s[ii + j] - top);
        for (int j = 0; j < 8; j++) acc[j] += (double)part[j] + (double)part[j + 8];
    }
    const ptrdiff_t n8 = nb + (n - nb) / 8 * 8;
    for (ptrdiff_t i = nb; i < n8; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (double)SJ_NAME(exp)(s[i + j] - top);
    for (ptrdiff_t i = n8; i < n; i++) acc[0] += (double)SJ_NAME(exp)(s[i] - top);
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* max of s[0:n] (NaN entries lose every comparison: ignored), in GCC vectors of the variant's width
   with two chains: the same loop over a float array ran scalar on every ISA (GCC would not
   vectorise the select) (log_softmax_f32, lse_f32) */
#if defined(__AVX512F__)
#define SJ_ACT_VF 16
#elif defined(__AVX2__)
#define SJ_ACT_VF 8
#else
#define SJ_ACT_VF 4
#endif
typedef float SJ_NAME(act_vf) __attribute__((vector_size(SJ_ACT_VF * 4)));
typedef float SJ_NAME(act_vfu) __attribute__((vector_size(SJ_ACT_VF * 4), aligned(4)));
typedef int SJ_NAME(act_vi) __attribute__((vector_size(SJ_ACT_VF * 4)));
static inline __attribute__((always_inline)) SJ_NAME(act_vf) SJ_NAME(vmax)(SJ_NAME(act_vf) x, SJ_NAME(act_vf) m) {
    const SJ_NAME(act_vi) gt = x > m;
    return (SJ_NAME(act_vf))(((SJ_NAME(act_vi))x & gt) | ((SJ_NAME(act_vi))m & ~gt));
}
static inline __attribute__((always_inline)) float SJ_NAME(max_f32)(const float *s, ptrdiff_t n) {
    const ptrdiff_t n2 = n - n % (2 * SJ_ACT_VF);
    float m = -__builtin_inff();
    if (n2) {
        SJ_NAME(act_vf) m0 = *(const SJ_NAME(act_vfu) *)s, m1 = *(const SJ_NAME(act_vfu) *)(s + SJ_ACT_VF);
        m0 = SJ_NAME(vmax)(m0, (SJ_NAME(act_vf)){0} - __builtin_inff()); /* NaN lanes start at -inf */
        m1 = SJ_NAME(vmax)(m1, (SJ_NAME(act_vf)){0} - __builtin_inff());
        for (ptrdiff_t i = 2 * SJ_ACT_VF; i < n2; i += 2 * SJ_ACT_VF) {
            m0 = SJ_NAME(vmax)(*(const SJ_NAME(act_vfu) *)(s + i), m0);
            m1 = SJ_NAME(vmax)(*(const SJ_NAME(act_vfu) *)(s + i + SJ_ACT_VF), m1);
        }
        m0 = SJ_NAME(vmax)(m1, m0);
        for (int j = 0; j < SJ_ACT_VF; j++) m = m0[j] > m ? m0[j] : m;
    }
    for (ptrdiff_t i = n2; i < n; i++) m = s[i] > m ? s[i] : m;
    return m;
}
#undef SJ_ACT_VF

static inline int SJ_NAME(has_nan)(const float *s, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        if (s[i] != s[i]) return 1;
    return 0;
}

/* log-softmax of s[0:n] in place (kernels/beam/_native.pxi: sj_log_softmax_row, the beam step's
   row of up to 250k logits, where the Cython loop's scalar exp and its float64 sum, one long chain,
   cost as much as the decoder step): returns 1 (row untouched) when it holds NaN; +inf entries
   share probability one; a row of only -inf stays as it is (nothing left to choose: the decode
   loops raise NothingGenerable, as seqjit.decoding.processors.log_softmax leaves it); else
   s = (s - max) - log(sum exp(s - max)).
   NaN needs no pass of its own (a NaN test in the max loop kept GCC from vectorising it: the pass
   ran scalar on every ISA, 6.5% of a Marian beam-4 batch-16 call): with a finite max a NaN entry
   makes the sum of exp NaN, and the rows whose max is +-inf (rare) are scanned. */
static int SJ_NAME(log_softmax_f32)(float *s, ptrdiff_t n) {
    const float top = SJ_NAME(max_f32)(s, n);
    if (top == __builtin_inff()) {
        if (SJ_NAME(has_nan)(s, n))
            return 1;
        ptrdiff_t n_inf = 0;
        for (ptrdiff_t i = 0; i < n; i++) n_inf += s[i] == __builtin_inff();
        const float lse = __builtin_logf((float)n_inf);
        for (ptrdiff_t i = 0; i < n; i++) s[i] = s[i] == __builtin_inff() ? -lse : -__builtin_inff();
        return 0;
    }
    if (top == -__builtin_inff())
        return SJ_NAME(has_nan)(s, n);
    const double total = SJ_NAME(sum_exp_f64)(s, n, top);
    if (total != total)
        return 1;
    const float lse = total > 0 ? __builtin_logf((float)total) : -__builtin_inff();
    for (ptrdiff_t i = 0; i < n; i++) s[i] = (s[i] - top) - lse;
    return 0;
}

/* log(sum exp(s - top)) over s[0:n], top = max(s) (written to *top): the log-probability
   normaliser of a decode step's logits row (_native_sampling.pxi, greedy and sampling with scores),
   vectorised (one exp per logit in a float64 chain was the cost of a step). */
static double SJ_NAME(lse_f32)(const float *s, ptrdiff_t n, float *top) {
    const float m = SJ_NAME(max_f32)(s, n);
    *top = m;
    return __builtin_log(SJ_NAME(sum_exp_f64)(s, n, m));
}

/* layer_norm of one row: mean and variance in float64 over 8 independent lanes (as the reference
   computes them in float64), then y = (x - mean) * rsqrt(var + eps) (* g) (+ b) in float32 */
static void SJ_NAME(layer_norm_row)(const float *x, float *y, int D, const float *g, const float *b, double eps) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int nv = D - D % 8;
    for (int d = 0; d < nv; d += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[d + j];
    for (int d = nv; d < D; d++) acc[0] += x[d];
    const double mean = (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) / D;
    for (int j = 0; j < 8; j++) acc[j] = 0;
    for (int d = 0; d < nv; d += 8)
        for (int j = 0; j < 8; j++) { double t = x[d + j] - mean; acc[j] += t * t; }
    for (int d = nv; d < D; d++) { double t = x[d] - mean; acc[0] += t * t; }
    const double var = (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) / D;
    const float inv = (float)(1.0 / __builtin_sqrt(var + eps)), mu = (float)mean;
    if (g && b) for (int d = 0; d < D; d++) y[d] = (x[d] - mu) * inv * g[d] + b[d];
    else if (g) for (int d = 0; d < D; d++) y[d] = (x[d] - mu) * inv * g[d];
    else if (b) for (int d = 0; d < D; d++) y[d] = (x[d] - mu) * inv + b[d];
    else for (int d = 0; d < D; d++) y[d] = (x[d] - mu) * inv;
}

/* softmax of s[0:n] * scale + bias[0:n] in place (the native attention's row with an additive
   position bias, T5): scale and add, then the softmax of softmax_row at scale 1 */
static void SJ_NAME(softmax_bias_row)(float *s, const float *bias, int n, float scale) {
    for (int j = 0; j < n; j++) s[j] = s[j] * scale + bias[j];
    SJ_NAME(softmax_row)(s, n, 1.0f);
}

/* rms_norm of one row (T5LayerNorm): mean of squares in float64 over 8 independent lanes, then
   y = x * rsqrt(mean + eps) * g in float32; no mean subtracted, no bias */
static void SJ_NAME(rms_norm_row)(const float *x, float *y, int D, const float *g, double eps) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int nv = D - D % 8;
    for (int d = 0; d < nv; d += 8)
        for (int j = 0; j < 8; j++) acc[j] += (double)x[d + j] * x[d + j];
    for (int d = nv; d < D; d++) acc[0] += (double)x[d] * x[d];
    const double ms = (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) / D;
    const float inv = (float)(1.0 / __builtin_sqrt(ms + eps));
    for (int d = 0; d < D; d++) y[d] = x[d] * inv * g[d];
}

/* y[i] = a[i] * b[i] (the gated FFN's product; y may be a or b) */
static void SJ_NAME(mul_row)(const float *a, const float *b, float *y, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}
