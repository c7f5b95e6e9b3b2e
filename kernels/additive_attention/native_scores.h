/* Bahdanau scores for the native replay: score[s] = v . tanh(W_q q + U k_s), the tanh over A
   values at a time (Eigen's rational float tanh, kernels/_sj_tanhf.h) and the dot product in 16-lane
   vectors. Compiled for AVX-512, AVX2 + FMA and baseline x86-64 like linear/native_gemv.h (which
   must be included first: it defines the vector types, the lane sums and the ISA pick). */
#ifndef SJ_NATIVE_SCORES_H
#define SJ_NATIVE_SCORES_H
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize ("no-trapping-math")  /* lets gcc if-convert the tanh clamp and vectorise it */
#endif
#include "_sj_tanhf.h"

#define SJ_ISA_BODY "additive_attention/native_scores_body.h"
#include "_sj_isa_variants.h"

static void sj_additive_scores(const float *qp, const float *kp, const float *v, int A, int S, float *tmp,
                               float *score) {
    SJ_DISPATCH(additive_scores, qp, kp, v, A, S, tmp, score);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#endif
