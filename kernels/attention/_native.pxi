# Native attention for the replay VM (decode and short encoder shapes): ``include "attention/_native.pxi"``.
# One (batch, head, query) row at a time: scores over the visible keys (the prefix rule of spec.py),
# softmax (of scores * scale + a row of the additive bias when there is one: T5's relative position
# bias, the op biased_attention), weighted sum of v. Strides in elements for the batch, head and length axes; the last
# axis is contiguous.
from libc.stdint cimport int64_t


cdef extern from "_runtime/prefetch.h" nogil:
    void sj_prefetch_rows(const float* p, Py_ssize_t n, Py_ssize_t stride, Py_ssize_t len)


cdef inline int _visible(const int64_t* lengths, int b, int Lk) noexcept nogil:
    """Keys of batch row ``b`` that may be attended to: ``Lk``, or fewer by its length."""
    cdef int vmax = Lk
    if lengths != NULL and lengths[b] < vmax:
        vmax = <int>lengths[b]
    return vmax if vmax > 0 else 0


cdef inline float _dot_lanes(const float* a, const float* b, int n) noexcept nogil:
    cdef float acc[8]
    cdef int j, k
    cdef int nv = n - n % 8
    cdef float s = 0
    for j in range(8):
        acc[j] = 0
    for k in range(0, nv, 8):
        for j in range(8):
            acc[j] += a[k + j] * b[k + j]
    for j in range(8):
        s += acc[j]
    for k in range(nv, n):
        s += a[k] * b[k]
    return s


cdef inline void _softmax(float* s, int n, float scale, const float* bias, Py_ssize_t at) noexcept nogil:
    """A row's softmax (activations/native_act.h, per instruction set), with ``bias + at`` added."""
    if bias == NULL:
        sj_softmax_row(s, n, scale)
    else:
        sj_softmax_bias_row(s, bias + at, n, scale)


cdef void native_attention(const float* q, Py_ssize_t qb, Py_ssize_t qh, Py_ssize_t ql,
                           const float* k, Py_ssize_t kb, Py_ssize_t kh, Py_ssize_t kl,
                           const float* v, Py_ssize_t vb, Py_ssize_t vh, Py_ssize_t vl,
                           float* o, Py_ssize_t ob, Py_ssize_t oh, Py_ssize_t ol,
                           const int64_t* lengths, int B, int H, int Lq, int Lk, int D, int Dv,
                           bint causal, float scale, float* scores,
                           const float* bias=NULL, Py_ssize_t bb=0, Py_ssize_t bh=0, Py_ssize_t bl=0) noexcept nogil:
    """``scores``: scratch of Lq * Lk floats. ``bias``: NULL, or added to the scaled scores before the
    softmax, row (b, h, i) at ``bias + b * bb + h * bh + i * bl`` (bb 0: one bias for the batch). Where the rows of q, k, v and out are contiguous (the
    planned layouts), a (batch, head) pair is two products of the GEMV kernels (scores = Q K^T
    over the visible keys, out = P V) around the softmax; otherwise one row at a time."""
    cdef int b, h, i, j, d, vis, vmax
    cdef float w
    cdef const float* qr
    cdef const float* vr
    cdef const float* kbh
    cdef const float* vbh
    cdef float* orow
    cdef float* srow
    cdef bint rows = kl == D and vl == Dv and ql == D and ol == Dv
    cdef int nb, nh, nvis
    for b in range(B):
        vmax = _visible(lengths, b, Lk)
        for h in range(H):
            kbh = k + b * kb + h * kh
            vbh = v + b * vb + h * vh
            # the next (batch, head)'s keys and values, while this one is computed: in a decode
            # step they come from memory (the step's weights evicted them), a few KB each
            nb = b if h + 1 < H else b + 1
            nh = h + 1 if h + 1 < H else 0
            if nb < B:
                nvis = _visible(lengths, nb, Lk)  # the causal limit only lowers it
                sj_prefetch_rows(k + nb * kb + nh * kh, nvis, kl, D)
                sj_prefetch_rows(v + nb * vb + nh * vh, nvis, vl, Dv)
            if rows and vmax > 0:
                sj_gemv_rows(q + b * qb + h * qh, D, Lq, kbh, D, NULL, scores, Lk, 0, vmax)
                if not causal and Lq > 1:  # every row sees the same keys: one product P V for all rows
                    for i in range(Lq):
                        _softmax(scores + i * Lk, vmax, scale, bias, b * bb + h * bh + i * bl)
                    sj_gemv_rows_in_out(scores, Lk, Lq, vbh, vmax, Dv, NULL, o + b * ob + h * oh, ol, 0, Dv)
                    continue
            for i in range(Lq):
                vis = vmax
                if causal and i + Lk - Lq + 1 < vis:
                    vis = i + Lk - Lq + 1
                orow = o + b * ob + h * oh + i * ol
                srow = scores + i * Lk
                if vis <= 0:
                    for d in range(Dv):
                        orow[d] = 0
                    continue
                if not rows:
                    qr = q + b * qb + h * qh + i * ql
                    for j in range(vis):
                        srow[j] = _dot_lanes(qr, kbh + j * kl, D)
                _softmax(srow, vis, scale, bias, b * bb + h * bh + i * bl)
                if rows:
                    sj_gemv_rows_in_out(srow, Lk, 1, vbh, vis, Dv, NULL, orow, Dv, 0, Dv)
                else:
                    for d in range(Dv):
                        orow[d] = 0
                    for j in range(vis):
                        w = srow[j]
                        vr = vbh + j * vl
                        for d in range(Dv):
                            orow[d] += w * vr[d]


#: the most scores (Lq x Lk floats) a team half computes in a scratch on its own stack
DEF ATTN_TEAM_SCRATCH = 4096


cdef struct _AttnJob:
    const float* q
    Py_ssize_t qb, qh, ql
    const float* k
    Py_ssize_t kb, kh, kl
    const float* v
    Py_ssize_t vb, vh, vl
    float* o
    Py_ssize_t ob, oh, ol
    const int64_t* lengths
    int B, H, Lq, Lk, D, Dv, mid
    bint causal
    float scale
    float* scores
    const float* bias
    Py_ssize_t bb, bh, bl


cdef void _attention_part(void* ctx, int part) noexcept nogil:
    """Batch rows [0, mid) (part 0, in the instruction's scratch) or [mid, B) (part 1, in a stack
    scratch) of a team-split native_attention."""
    cdef _AttnJob* j = <_AttnJob*>ctx
    cdef float buf[ATTN_TEAM_SCRATCH]
    cdef int b0 = 0 if part == 0 else j.mid
    cdef int b1 = j.mid if part == 0 else j.B
    native_attention(j.q + b0 * j.qb, j.qb, j.qh, j.ql, j.k + b0 * j.kb, j.kb, j.kh, j.kl,
                     j.v + b0 * j.vb, j.vb, j.vh, j.vl, j.o + b0 * j.ob, j.ob, j.oh, j.ol,
                     j.lengths + b0 if j.lengths != NULL else NULL, b1 - b0, j.H, j.Lq, j.Lk, j.D, j.Dv,
                     j.causal, j.scale, j.scores if part == 0 else buf,
                     j.bias + b0 * j.bb if j.bias != NULL else NULL, j.bb, j.bh, j.bl)


cdef void native_attention_team(const float* q, Py_ssize_t qb, Py_ssize_t qh, Py_ssize_t ql,
                                const float* k, Py_ssize_t kb, Py_ssize_t kh, Py_ssize_t kl,
                                const float* v, Py_ssize_t vb, Py_ssize_t vh, Py_ssize_t vl,
                                float* o, Py_ssize_t ob, Py_ssize_t oh, Py_ssize_t ol,
                                const int64_t* lengths, int B, int H, int Lq, int Lk, int D, int Dv,
                                bint causal, float scale, float* scores,
                                const float* bias, Py_ssize_t bb, Py_ssize_t bh, Py_ssize_t bl) noexcept nogil:
    """native_attention with the batch rows split in two halves over the team of two (native_team.h,
    held by the caller): a decode step's attention reads every row's K/V cache (12 MB per step for
    Marian at batch 16), on one core otherwise while the other waited. Each row is computed as
    alone, so the results are the same bit for bit. One row, or more scores than a stack scratch
    holds: on the calling thread."""
    cdef _AttnJob job
    if B < 2 or <Py_ssize_t>Lq * Lk > ATTN_TEAM_SCRATCH:
        native_attention(q, qb, qh, ql, k, kb, kh, kl, v, vb, vh, vl, o, ob, oh, ol, lengths, B, H, Lq, Lk, D, Dv,
                         causal, scale, scores, bias, bb, bh, bl)
        return
    job.q, job.qb, job.qh, job.ql = q, qb, qh, ql
    job.k, job.kb, job.kh, job.kl = k, kb, kh, kl
    job.v, job.vb, job.vh, job.vl = v, vb, vh, vl
    job.o, job.ob, job.oh, job.ol = o, ob, oh, ol
    job.lengths, job.B, job.H, job.Lq, job.Lk, job.D, job.Dv = lengths, B, H, Lq, Lk, D, Dv
    job.mid = B // 2
    job.causal, job.scale, job.scores = causal, scale, scores
    job.bias, job.bb, job.bh, job.bl = bias, bb, bh, bl
    sj_team_run(_attention_part, &job)


cdef inline int run_attention(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """OP_ATTENTION: batch rows split over the team of two while the run holds it."""
    if team:
        native_attention_team(<float*>c.p[ATTENTION_P_Q], c.i[ATTENTION_I_QB], c.i[ATTENTION_I_QH],
                              c.i[ATTENTION_I_QL], <float*>c.p[ATTENTION_P_K], c.i[ATTENTION_I_KB],
                              c.i[ATTENTION_I_KH], c.i[ATTENTION_I_KL], <float*>c.p[ATTENTION_P_V],
                              c.i[ATTENTION_I_VB], c.i[ATTENTION_I_VH], c.i[ATTENTION_I_VL],
                              <float*>c.p[ATTENTION_P_O], c.i[ATTENTION_I_OB], c.i[ATTENTION_I_OH],
                              c.i[ATTENTION_I_OL], <int64_t*>c.p[ATTENTION_P_LENGTHS], <int>c.i[ATTENTION_I_B],
                              <int>c.i[ATTENTION_I_H], <int>c.i[ATTENTION_I_LQ], <int>c.i[ATTENTION_I_LK],
                              <int>c.i[ATTENTION_I_D], <int>c.i[ATTENTION_I_DV], c.i[ATTENTION_I_CAUSAL] != 0,
                              <float>c.f[ATTENTION_F_SCALE], <float*>c.p[ATTENTION_P_SCORES],
                              <float*>c.p[ATTENTION_P_BIAS], c.i[ATTENTION_I_BB], c.i[ATTENTION_I_BH],
                              c.i[ATTENTION_I_BL])
    else:
        native_attention(<float*>c.p[ATTENTION_P_Q], c.i[ATTENTION_I_QB], c.i[ATTENTION_I_QH],
                         c.i[ATTENTION_I_QL], <float*>c.p[ATTENTION_P_K], c.i[ATTENTION_I_KB],
                         c.i[ATTENTION_I_KH], c.i[ATTENTION_I_KL], <float*>c.p[ATTENTION_P_V],
                         c.i[ATTENTION_I_VB], c.i[ATTENTION_I_VH], c.i[ATTENTION_I_VL],
                         <float*>c.p[ATTENTION_P_O], c.i[ATTENTION_I_OB], c.i[ATTENTION_I_OH],
                         c.i[ATTENTION_I_OL], <int64_t*>c.p[ATTENTION_P_LENGTHS], <int>c.i[ATTENTION_I_B],
                         <int>c.i[ATTENTION_I_H], <int>c.i[ATTENTION_I_LQ], <int>c.i[ATTENTION_I_LK],
                         <int>c.i[ATTENTION_I_D], <int>c.i[ATTENTION_I_DV], c.i[ATTENTION_I_CAUSAL] != 0,
                         <float>c.f[ATTENTION_F_SCALE], <float*>c.p[ATTENTION_P_SCORES],
                         <float*>c.p[ATTENTION_P_BIAS], c.i[ATTENTION_I_BB], c.i[ATTENTION_I_BH],
                         c.i[ATTENTION_I_BL])
    return ERR_NONE
