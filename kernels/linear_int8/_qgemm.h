/* int8 x int8 -> int32 products and per-row int8 quantization for kernels/linear_int8/cython_cpu.pyx.

Three instruction sets, picked at run time (sjq_detect, capped by $SEQJIT_ISA):
  SJQ_VNNI     AVX512-VNNI (with F, BW, VL): vpdpbusd multiplies unsigned by signed bytes, so the weight bytes are
               flipped to unsigned (w ^ 0x80 = w + 128) and the activation row stays signed:
               sum (w + 128) x = sum w x + 128 sum x, and 128 * sum(x) (computed when x is quantized)
               is subtracted. vpdpbusd does not saturate; |sum| <= K * 255 * 127 < 2^31 for
               K <= 65536 (spec.K_MAX).
  SJQ_AVX2     vpmaddubsw on |x| (0..127, unsigned) and sign(x) * w (-127..127): each pair sum is at
               most 2 * 127 * 127 = 32258 < 32767, so the int16 step cannot saturate; vpmaddwd
               widens to int32.
  SJQ_PORTABLE plain C loops.
Every path gives the exact int32 sums, so the three agree bit for bit.

The functions are compiled for their instruction set with target attributes, so the module itself
needs no -m flags and runs on any x86-64 (and, portable path only, on any other CPU). */
#ifndef SJ_QGEMM_H
#define SJ_QGEMM_H
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "_runtime/isa_cap.h"

enum { SJQ_PORTABLE = 0, SJQ_AVX2 = 1, SJQ_VNNI = 2 };
/* or-ed into sjq_columns' isa argument: the weight streams from memory (larger than the caches, or read
   once per decode step), so tiles of several x rows prefetch it ahead too, not only one-row tiles (16
   rows x 30 MB: 1.4x); only the first x-row tile of each 8 weight rows does, the others find them in L1 */
#define SJQ_STREAM 16
/* the least distance (bytes) the one-row kernel prefetches weights ahead: ~12 KB measured best for a
   512-column weight streamed from memory on Zen 4 (one 4 KB tile ahead was 1.3x slower) */
#define SJQ_PREFETCH 12288

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SJQ_X86 1
#include <immintrin.h>
#define SJQ_TGT_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define SJQ_TGT_AVX2 __attribute__((target("avx2")))
#define SJQ_INLINE static inline __attribute__((always_inline))
#endif

/* the best instruction set this CPU (and its OS) supports under $SEQJIT_ISA (_runtime/isa_cap.h:
   "avx512" allows VNNI where the CPU has it, "avx2" the AVX2 path, "baseline" the portable one) */
static int sjq_detect(void) {
#ifdef SJQ_X86
    int level = sj_isa_level();
    __builtin_cpu_init();
    if (level >= SJ_ISA_AVX512 && __builtin_cpu_supports("avx512vnni"))
        return SJQ_VNNI;
    if (level >= SJ_ISA_AVX2) return SJQ_AVX2;
#endif
    return SJQ_PORTABLE;
}

/* ---- quantization of one row: q = clamp(rint(x * (127 / amax)), -127, 127), scale = amax / 127;
   returns the scale and stores sum(q) in *qsum. rint rounds half to even (the default rounding mode,
   as numpy.rint and cvtps2dq). */
static float sjq_quantize_portable(const float *x, long K, int8_t *q, int32_t *qsum) {
    float amax = 0.0f;
    for (long k = 0; k < K; k++) {
        float a = fabsf(x[k]);
        amax = a > amax ? a : amax;
    }
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t s = 0;
    for (long k = 0; k < K; k++) {
        float v = nearbyintf(x[k] * inv);
        v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
        q[k] = (int8_t)v;
        s += q[k];
    }
    *qsum = s;
    return amax / 127.0f;
}

#ifdef SJQ_X86
SJQ_TGT_VNNI static float sjq_quantize_avx512(const float *x, long K, int8_t *q, int32_t *qsum) {
    __m512 vmax = _mm512_setzero_ps();
    long k = 0;
    for (; k + 16 <= K; k += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
    float amax = _mm512_reduce_max_ps(vmax);
    for (; k < K; k++) {
        float a = fabsf(x[k]);
        amax = a > amax ? a : amax;
    }
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    __m512i vsum = _mm512_setzero_si512();
    for (k = 0; k < K; k += 16) {
        __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1u);
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + k), vinv));
        v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
        vsum = _mm512_add_epi32(vsum, v);  /* masked-off lanes hold 0 */
        _mm_mask_storeu_epi8(q + k, m, _mm512_cvtepi32_epi8(v));
    }
    *qsum = _mm512_reduce_add_epi32(vsum);
    return amax / 127.0f;
}

SJQ_TGT_AVX2 static float sjq_quantize_avx2(const float *x, long K, int8_t *q, int32_t *qsum) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps();
    long k = 0;
    for (; k + 8 <= K; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), absmask));
    float lanes[8];
    _mm256_storeu_ps(lanes, vmax);
    float amax = 0.0f;
    for (int i = 0; i < 8; i++) amax = lanes[i] > amax ? lanes[i] : amax;
    for (; k < K; k++) {
        float a = fabsf(x[k]);
        amax = a > amax ? a : amax;
    }
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    __m256i vsum = _mm256_setzero_si256();
    int32_t buf[8];
    for (k = 0; k + 8 <= K; k += 8) {
        __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vinv));
        v = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
        vsum = _mm256_add_epi32(vsum, v);
        _mm256_storeu_si256((__m256i *)buf, v);
        for (int i = 0; i < 8; i++) q[k + i] = (int8_t)buf[i];
    }
    _mm256_storeu_si256((__m256i *)buf, vsum);
    int32_t s = 0;
    for (int i = 0; i < 8; i++) s += buf[i];
    for (; k < K; k++) {
        float v = nearbyintf(x[k] * inv);
        v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
        q[k] = (int8_t)v;
        s += q[k];
    }
    *qsum = s;
    return amax / 127.0f;
}
#endif

static float sjq_quantize_row(int isa, const float *x, long K, int8_t *q, int32_t *qsum) {
#ifdef SJQ_X86
    if (isa == SJQ_VNNI) return sjq_quantize_avx512(x, K, q, qsum);
    if (isa == SJQ_AVX2) return sjq_quantize_avx2(x, K, q, qsum);
#endif
    return sjq_quantize_portable(x, K, q, qsum);
}

/* ---- tiles: c[i * ldc + j] = sum_k x[i * ldx + k] * w[j * ldw + k] for i < mr, j < nr.
   xsum[i] = sum_k x[i * ldx + k] (used by the VNNI path only). */
static void sjq_tile_portable(const int8_t *x, long ldx, int mr, const int8_t *w, long ldw, int nr, long K,
                              const int32_t *xsum, int32_t *c, long ldc, int stream) {
    (void)xsum;
    (void)stream;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            const int8_t *xi = x + i * ldx, *wj = w + j * ldw;
            int32_t s = 0;
            for (long k = 0; k < K; k++) s += (int32_t)xi[k] * (int32_t)wj[k];
            c[i * ldc + j] = s;
        }
}

#ifdef SJQ_X86
/* the sums of 4 vectors of int32 lanes as one vector [sum a0, sum a1, sum a2, sum a3]: a transpose-and-add
   tree (10 instructions for 4 sums instead of ~8 each) */
SJQ_INLINE SJQ_TGT_VNNI __m128i sjq_reduce4_512(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
    __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
    __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
    __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* MR x NR accumulators of 16 int32 lanes (NR 1, 4 or 8); the K tail (K % 64 bytes) by zero-masked loads
   (a zero x byte contributes nothing whatever the flipped weight byte) */
SJQ_INLINE SJQ_TGT_VNNI void sjq_block_vnni(const int8_t *x, long ldx, const int8_t *w, long ldw, long K,
                                            const int32_t *xsum, int32_t *c, long ldc, const int MR, const int NR,
                                            const int STREAM) {
    __m512i acc[4][8];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm512_setzero_si512();
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const long pf = NR * ldw > SJQ_PREFETCH ? NR * ldw : SJQ_PREFETCH;
    long k = 0;
    for (; k + 64 <= K; k += 64) {
        __m512i wv[8];
        for (int j = 0; j < NR; j++) wv[j] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(w + j * ldw + k)), flip);
        if (MR == 1 || STREAM)  /* weight-bandwidth bound: fetch ahead by a tile, at least SJQ_PREFETCH bytes */
            for (int j = 0; j < NR; j++) _mm_prefetch((const char *)(w + j * ldw + k) + pf, _MM_HINT_T0);
        for (int i = 0; i < MR; i++) {
            __m512i xv = _mm512_loadu_si512((const void *)(x + i * ldx + k));
            for (int j = 0; j < NR; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], wv[j], xv);
        }
    }
    if (k < K) {
        __mmask64 m = ((__mmask64)1 << (K - k)) - 1;
        __m512i wv[8];
        for (int j = 0; j < NR; j++) wv[j] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, w + j * ldw + k), flip);
        for (int i = 0; i < MR; i++) {
            __m512i xv = _mm512_maskz_loadu_epi8(m, x + i * ldx + k);
            for (int j = 0; j < NR; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], wv[j], xv);
        }
    }
    for (int i = 0; i < MR; i++) {
        if (NR % 4 == 0) {
            const __m128i off = _mm_set1_epi32(128 * xsum[i]);
            for (int j = 0; j < NR; j += 4)
                _mm_storeu_si128((__m128i *)(c + i * ldc + j),
                                 _mm_sub_epi32(sjq_reduce4_512(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), off));
        } else {
            for (int j = 0; j < NR; j++) c[i * ldc + j] = _mm512_reduce_add_epi32(acc[i][j]) - 128 * xsum[i];
        }
    }
}

SJQ_TGT_VNNI static void sjq_tile_vnni(const int8_t *x, long ldx, int mr, const int8_t *w, long ldw, int nr, long K,
                                       const int32_t *xsum, int32_t *c, long ldc, int stream) {
    if (mr == 4 && nr == 8) {
        if (stream) {
            sjq_block_vnni(x, ldx, w, ldw, K, xsum, c, ldc, 4, 4, 1);
            sjq_block_vnni(x, ldx, w + 4 * ldw, ldw, K, xsum, c + 4, ldc, 4, 4, 1);
        } else {
            sjq_block_vnni(x, ldx, w, ldw, K, xsum, c, ldc, 4, 4, 0);
            sjq_block_vnni(x, ldx, w + 4 * ldw, ldw, K, xsum, c + 4, ldc, 4, 4, 0);
        }
        return;
    }
    if (mr == 4 && nr == 4) { sjq_block_vnni(x, ldx, w, ldw, K, xsum, c, ldc, 4, 4, 0); return; }
    if (mr == 1 && nr == 8) { sjq_block_vnni(x, ldx, w, ldw, K, xsum, c, ldc, 1, 8, 0); return; }
    if (mr == 1 && nr >= 4) {
        sjq_block_vnni(x, ldx, w, ldw, K, xsum, c, ldc, 1, 4, 0);
        w += 4 * ldw; c += 4; nr -= 4;
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            sjq_block_vnni(x + i * ldx, ldx, w + j * ldw, ldw, K, xsum + i, c + i * ldc + j, ldc, 1, 1, 0);
}

SJQ_INLINE SJQ_TGT_AVX2 int32_t sjq_hsum256(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

SJQ_INLINE SJQ_TGT_AVX2 __m128i sjq_reduce4_256(__m256i a0, __m256i a1, __m256i a2, __m256i a3) {
    __m256i s01 = _mm256_add_epi32(_mm256_unpacklo_epi32(a0, a1), _mm256_unpackhi_epi32(a0, a1));
    __m256i s23 = _mm256_add_epi32(_mm256_unpacklo_epi32(a2, a3), _mm256_unpackhi_epi32(a2, a3));
    __m256i s = _mm256_add_epi32(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

SJQ_INLINE SJQ_TGT_AVX2 void sjq_block_avx2(const int8_t *x, long ldx, const int8_t *w, long ldw, long K,
                                            int32_t *c, long ldc, const int MR, const int NR) {
    __m256i acc[4][4];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    long k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i wv[4];
        for (int j = 0; j < NR; j++) wv[j] = _mm256_loadu_si256((const __m256i *)(w + j * ldw + k));
        for (int i = 0; i < MR; i++) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(x + i * ldx + k));
            __m256i ax = _mm256_sign_epi8(xv, xv);  /* |x|: 0..127 as unsigned bytes */
            for (int j = 0; j < NR; j++) {
                __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[j], xv));  /* |x| * sign(x) w */
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(p, ones));
            }
        }
    }
    int32_t sums[4][4];
    for (int i = 0; i < MR; i++) {
        if (NR == 4)
            _mm_storeu_si128((__m128i *)sums[i], sjq_reduce4_256(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        else
            for (int j = 0; j < NR; j++) sums[i][j] = sjq_hsum256(acc[i][j]);
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            const int8_t *xi = x + i * ldx, *wj = w + j * ldw;
            int32_t s = sums[i][j];
            for (long t = k; t < K; t++) s += (int32_t)xi[t] * (int32_t)wj[t];
            c[i * ldc + j] = s;
        }
}

SJQ_TGT_AVX2 static void sjq_tile_avx2(const int8_t *x, long ldx, int mr, const int8_t *w, long ldw, int nr, long K,
                                       const int32_t *xsum, int32_t *c, long ldc, int stream) {
    (void)xsum;
    (void)stream;
    /* 4 x rows: 4 x 2 blocks (8 accumulators, 2 weight vectors: the 16 ymm registers hold them; a
       4 x 4 block's 16 accumulators spilled every step); 1 row: 1 x 4 */
    while (nr >= 2 && mr == 4) {
        sjq_block_avx2(x, ldx, w, ldw, K, c, ldc, 4, 2);
        w += 2 * ldw; c += 2; nr -= 2;
    }
    while (nr >= 4 && mr == 1) {
        sjq_block_avx2(x, ldx, w, ldw, K, c, ldc, 1, 4);
        w += 4 * ldw; c += 4; nr -= 4;
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            sjq_block_avx2(x + i * ldx, ldx, w + j * ldw, ldw, K, c + i * ldc + j, ldc, 1, 1);
}
#endif

/* The epilogue of one tile row: o[j] = float32(float64(float32(t[j])) * float64(float32(xs * ws[j]))
   + bias[j]) for j < nr (bias may be NULL): the reference's arithmetic (the product of two float32
   values is exact in float64, so contracting it into a fused multiply-add changes nothing). */
static inline void sjq_epilogue_portable(const int32_t *t, float xs, const float *ws, const float *bias, float *o,
                                         int nr) {
    for (int j = 0; j < nr; j++) {
        float s = xs * ws[j];
        double y = (double)(float)t[j] * (double)s;
        if (bias != NULL) y += (double)bias[j];
        o[j] = (float)y;
    }
}

#ifdef SJQ_X86
SJQ_INLINE SJQ_TGT_VNNI void sjq_epilogue_vnni(const int32_t *t, float xs, const float *ws, const float *bias,
                                               float *o, int nr) {
    __mmask8 m = (__mmask8)((1u << nr) - 1u);
    __m256 s = _mm256_mul_ps(_mm256_set1_ps(xs), _mm256_maskz_loadu_ps(m, ws));
    __m512d y = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_cvtepi32_ps(_mm256_maskz_loadu_epi32(m, t))), _mm512_cvtps_pd(s));
    if (bias != NULL) y = _mm512_add_pd(y, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, bias)));
    _mm256_mask_storeu_ps(o, m, _mm512_cvtpd_ps(y));
}

SJQ_INLINE SJQ_TGT_AVX2 void sjq_epilogue_avx2(const int32_t *t, float xs, const float *ws, const float *bias,
                                               float *o, int nr) {
    if (nr < 8) {
        sjq_epilogue_portable(t, xs, ws, bias, o, nr);
        return;
    }
    __m256 s = _mm256_mul_ps(_mm256_set1_ps(xs), _mm256_loadu_ps(ws));
    __m256 f = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)t));
    __m256d lo = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f)), _mm256_cvtps_pd(_mm256_castps256_ps128(s)));
    __m256d hi = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)));
    if (bias != NULL) {
        __m256 b = _mm256_loadu_ps(bias);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(b)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)));
    }
    _mm256_storeu_ps(o, _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)));
}
#endif

/* Columns c0:c1 of the product of M quantized rows qx (row stride ldq, scales xs, sums xsum) and the
   weight rows w[c0:c1] (int8 [N, K], scales ws), 8 weight rows at a time against every x row (4 rows
   per tile): the exact int32 sums into acc (row stride lda) when acc is not NULL; otherwise the
   epilogue above into out (row stride ldo; bias may be NULL). One copy per instruction set, so the
   tile and the epilogue inline. isa may carry SJQ_STREAM. The tiles read klen bytes of each weight row
   from wskew bytes before it (see sjq_columns_vnni; klen = K, wskew = 0 elsewhere). */
#define SJQ_COLUMNS_BODY(TILE, EPILOGUE) \
    int32_t tile[32]; \
    for (long n0 = c0; n0 < c1; n0 += 8) { \
        int nr = c1 - n0 < 8 ? (int)(c1 - n0) : 8; \
        for (long m0 = 0; m0 < M;) { \
            int mr = M - m0 >= 4 ? 4 : 1; \
            TILE(qx + m0 * ldq, ldq, mr, w + n0 * K - wskew, K, nr, klen, xsum + m0, tile, 8, stream && m0 == 0); \
            for (int i = 0; i < mr; i++) { \
                if (acc != NULL) { \
                    for (int j = 0; j < nr; j++) acc[(m0 + i) * lda + n0 + j] = tile[i * 8 + j]; \
                } else { \
                    EPILOGUE(tile + i * 8, xs[m0 + i], ws + n0, bias != NULL ? bias + n0 : NULL, \
                             out + (m0 + i) * ldo + n0, nr); \
                } \
            } \
            m0 += mr; \
        } \
    }
#define SJQ_COLUMNS_ARGS int stream, const int8_t *qx, long ldq, const int32_t *xsum, const float *xs, long M, long K, \
    const int8_t *w, const float *ws, const float *bias, float *out, long ldo, int32_t *acc, long lda, long c0, long c1

static void sjq_columns_portable(SJQ_COLUMNS_ARGS) {
    const long klen = K, wskew = 0;
    SJQ_COLUMNS_BODY(sjq_tile_portable, sjq_epilogue_portable)
}
#ifdef SJQ_X86
/* the longest x row the VNNI path copies to line up with misaligned weight rows (below) */
#define SJQ_SKEW_MAX_K 4096
SJQ_TGT_VNNI static void sjq_columns_vnni_body(SJQ_COLUMNS_ARGS, long klen, long wskew) {
    SJQ_COLUMNS_BODY(sjq_tile_vnni, sjq_epilogue_vnni)
}
/* Weight rows that do not start on a cache line (NumPy's arrays are 16-byte aligned) make every 64-byte
   load span two lines: ~10-20 % of a batch-1 decode step streamed from memory. For one-row tiles (M < 4)
   with every row at the same offset s in its line (K % 64 == 0), the tiles instead read whole lines from
   s bytes before each row, K + s rounded up to 64 bytes, against copies of the x rows with s zero bytes
   in front and zeros after: the bytes of the neighbouring rows meet zero x bytes and add nothing (in the
   flipped form too: (w + 128) * 0), so the int32 sums are the same. The lines read outside a row belong
   to its neighbours or, at the ends of the weight, share a line (so a page) with it. */
SJQ_TGT_VNNI static void sjq_columns_vnni(SJQ_COLUMNS_ARGS) {
    const long skew = (long)((uintptr_t)(w + c0 * K) & 63);
    if (skew == 0 || M >= 4 || K % 64 != 0 || K > SJQ_SKEW_MAX_K || K < 128) {
        sjq_columns_vnni_body(stream, qx, ldq, xsum, xs, M, K, w, ws, bias, out, ldo, acc, lda, c0, c1, K, 0);
        return;
    }
    const long klen = (K + skew + 63) & ~63L;
    int8_t padded[3][SJQ_SKEW_MAX_K + 64] __attribute__((aligned(64)));
    for (long i = 0; i < M; i++) {
        memset(padded[i], 0, (size_t)klen);
        memcpy(padded[i] + skew, qx + i * ldq, (size_t)K);
    }
    sjq_columns_vnni_body(stream, padded[0], SJQ_SKEW_MAX_K + 64, xsum, xs, M, K, w, ws, bias, out, ldo, acc, lda,
                          c0, c1, klen, skew);
}
SJQ_TGT_AVX2 static void sjq_columns_avx2(SJQ_COLUMNS_ARGS) {
    const long klen = K, wskew = 0;
    SJQ_COLUMNS_BODY(sjq_tile_avx2, sjq_epilogue_avx2)
}
#endif

static void sjq_columns(int isa, const int8_t *qx, long ldq, const int32_t *xsum, const float *xs, long M, long K,
                        const int8_t *w, const float *ws, const float *bias, float *out, long ldo, int32_t *acc,
                        long lda, long c0, long c1) {
    int stream = (isa & SJQ_STREAM) != 0;
    isa &= ~SJQ_STREAM;
#ifdef SJQ_X86
    if (isa == SJQ_VNNI) {
        sjq_columns_vnni(stream, qx, ldq, xsum, xs, M, K, w, ws, bias, out, ldo, acc, lda, c0, c1);
        return;
    }
    if (isa == SJQ_AVX2) {
        sjq_columns_avx2(stream, qx, ldq, xsum, xs, M, K, w, ws, bias, out, ldo, acc, lda, c0, c1);
        return;
    }
#endif
    sjq_columns_portable(stream, qx, ldq, xsum, xs, M, K, w, ws, bias, out, ldo, acc, lda, c0, c1);
}

/* whether `isa` can run here (a request for a path this CPU lacks falls back to a lower one) */
static inline int sjq_clamp_isa(int isa) {
    int best = sjq_detect();
    return isa < best ? isa : best;
}
#endif
