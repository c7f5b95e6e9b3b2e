/* float32 activations, recurrent gate rows, attention softmax rows (with an additive bias too), the
   beam step's log-softmax rows, layer-norm and RMS-norm rows and elementwise products for the
   native replay (seqjit.graph._native_vm), compiled for AVX-512, AVX2 + FMA and the baseline (the
   row loops vectorise: 16, 8 or 4 lanes) and picked at run time by CPU features (the dispatch of
   linear/native_gemv.h). Cython's own loops in this module are compiled for the baseline only
   (SSE2: four lanes at best). */
#ifndef SJ_NATIVE_ACT_H
#define SJ_NATIVE_ACT_H
#include <stddef.h>
#include "linear/native_gemv.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")  /* if-convert the selects (see kernels/_vecmath.pxi) */
#endif
#define SJ_ISA_BODY "activations/native_act_body.h"
#include "_sj_isa_variants.h"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static void sj_act_row(const float *src, const float *bias, float *dst, ptrdiff_t n, int code) {
    SJ_DISPATCH(act_row, src, bias, dst, n, code);
}

static void sj_gru_gates_row(const float *xr, float *hr, const float *h, float *out, int H) {
    SJ_DISPATCH(gru_gates_row, xr, hr, h, out, H);
}

static void sj_lstm_gates_row(const float *xr, float *hr, const float *c, float *h_out, float *c_out, int H) {
    SJ_DISPATCH(lstm_gates_row, xr, hr, c, h_out, c_out, H);
}

static void sj_softmax_row(float *s, int n, float scale) { SJ_DISPATCH(softmax_row, s, n, scale); }

static void sj_layer_norm_row(const float *x, float *y, int D, const float *g, const float *b, double eps) {
    SJ_DISPATCH(layer_norm_row, x, y, D, g, b, eps);
}

static void sj_softmax_bias_row(float *s, const float *bias, int n, float scale) {
    SJ_DISPATCH(softmax_bias_row, s, bias, n, scale);
}

static void sj_rms_norm_row(const float *x, float *y, int D, const float *g, double eps) {
    SJ_DISPATCH(rms_norm_row, x, y, D, g, eps);
}

/* 1 when the row holds NaN (see the body) */
static int sj_log_softmax_f32(float *s, ptrdiff_t n) { return SJ_DISPATCH_VALUE(log_softmax_f32, s, n); }

static double sj_lse_f32(const float *s, ptrdiff_t n, float *top) { return SJ_DISPATCH_VALUE(lse_f32, s, n, top); }

static void sj_mul_row(const float *a, const float *b, float *y, ptrdiff_t n) { SJ_DISPATCH(mul_row, a, b, y, n); }
#endif
