/* The greedy token of a row of logits for the native decoding loops (seqjit.graph._native_vm.greedy):
   numpy.argmax's first index of the largest value, or -1 when the row holds a NaN. Compiled per
   instruction set (_sj_isa_variants.h) and picked with the GEMV's choice (linear/native_gemv.h).

   Why: the loop it replaces (one element at a time, a NaN test and a compare-and-branch each) was a
   visible part of a large-vocabulary decode step, run on one core while the other waited. */
#ifndef SJ_NATIVE_ARGMAX_H
#define SJ_NATIVE_ARGMAX_H
#include <stddef.h>
#include "linear/native_gemv.h"

#define SJ_ISA_BODY "sampling/native_argmax_body.h"
#include "_sj_isa_variants.h"

static ptrdiff_t sj_argmax_row(const float *x, ptrdiff_t n) {
    int isa_ = sj_gemv_pick();
#if defined(__GNUC__) && defined(__x86_64__)
    if (isa_ == 2)
        return sj_argmax_row_avx512(x, n);
    if (isa_ == 1)
        return sj_argmax_row_avx2(x, n);
#endif
    (void)isa_;
    return sj_argmax_row_base(x, n);
}
#endif
