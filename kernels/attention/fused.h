/* Fused float32 attention for long inputs (cython_cpu.pyx's path where Lq >= FUSED_MIN_QUERIES):
   one work item is up to SJ_FA_QB query rows of one (batch, head), walked over the visible keys in blocks
   of SJ_FA_NB keys, everything of a block in L1/L2 and no BLAS call:

   - the key block is packed once, transposed into panels of TW keys ([panel][d][TW], zero past the
     block), for every row tile of the work item;
   - per tile of MR query rows (the queries pre-scaled by scale * log2(e), so scores are base 2):
     scores = Q K^T by a register-blocked micro-kernel (MR x TW accumulators, a pair of key vectors
     loaded and a query value broadcast per d);
   - the online softmax of each row (running max and sum, a vector exp2 polynomial: the same as the
     blocked kernel's sj_exp2f, < 1 ulp), masked lanes exactly 0;
   - out += P V by a second micro-kernel (MR rows x 2 vectors of Dv columns, v rows read as they lie),
     the tile's accumulators rescaled on their way into the registers.

   Masking is the prefix rule of spec.py: row r sees keys j < nvis(r) = min(lenb, first + r + 1 when
   causal), first = i0 + Lk - Lq; a block no row of a tile sees is skipped, one every row sees
   entirely runs unmasked, and a row that sees no key at all gets zeros (never NaN).

   Compiled per instruction set (_sj_isa_variants.h: AVX-512, AVX2 + FMA, baseline SSE2) and picked
   by sj_fa_use(level), capped by $SEQJIT_ISA through the caller's _runtime/isa_cap.h level. */
#ifndef SJ_ATTN_FUSED_H
#define SJ_ATTN_FUSED_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "_runtime/isa_cap.h"

/* the most query rows of a work item (the caller picks 48, 96 or 192: multiples of every variant's
   tile rows, 6 and 12). The key block is packed once per work item, so more rows pack less: at 48
   rows the packing took 14% of an L 2048 self-attention (perf, AVX2) */
#ifndef SJ_FA_QB
#define SJ_FA_QB 192
#endif
/* keys of a block: a multiple of every variant's score tile (8, 16, 32 keys) */
#ifndef SJ_FA_NB
#define SJ_FA_NB 64
#endif
/* the most tile rows of any variant (the score scratch) */
#define SJ_FA_MRMAX 12

#define SJ_ISA_BODY "attention/fused_body.h"
#include "_sj_isa_variants.h"

/* floats of scratch one thread needs at head sizes D, Dv */
static inline ptrdiff_t sj_fa_scratch_floats(ptrdiff_t D, ptrdiff_t Dv) {
    return D * SJ_FA_NB + SJ_FA_QB * (D + Dv) + SJ_FA_MRMAX * SJ_FA_NB + 2 * SJ_FA_QB;
}

typedef void (*sj_fa_fn)(const float *, const float *, const float *, float *, int, int, int, int64_t, int,
                         int64_t, float, float *);
static sj_fa_fn sj_fa_impl = sj_fa_block_base;

/* use the variant of this level (SJ_ISA_*; the caller checks the CPU has it) */
static inline void sj_fa_use(int level) {
#if defined(__GNUC__) && defined(__x86_64__)
    sj_fa_impl = level >= SJ_ISA_AVX512 ? sj_fa_block_avx512 : level >= SJ_ISA_AVX2 ? sj_fa_block_avx2
               : sj_fa_block_base;
#else
    (void)level;
    sj_fa_impl = sj_fa_block_base;
#endif
}

/* One work item: m <= SJ_FA_QB query rows q[r * D + d] (starting at row i0 of a (batch, head)),
   that head's keys k[j * D + d] and values v[j * Dv + d], output rows o[r * Dv + d]; lenb the batch
   row's length (at most Lk), first = i0 + Lk - Lq (the causal offset of row 0), qscale = scale *
   log2(e); scratch of sj_fa_scratch_floats(D, Dv) floats, this thread's own. */
static inline void sj_fa_block(const float *q, const float *k, const float *v, float *o, int m, int D, int Dv,
                               int64_t lenb, int causal, int64_t first, float qscale, float *scratch) {
    sj_fa_impl(q, k, v, o, m, D, Dv, lenb, causal, first, qscale, scratch);
}
#endif
