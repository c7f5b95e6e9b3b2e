# Native linear_half and embedding_half for the replay VM: ``include "linear_half/_native.pxi"`` after
# linear/_native.pxi (activations, the team, TEAM, SJ_PANEL). The kernels of native_half.h: float32
# products over 16-bit weights (fp16 or bf16 bits, packed in panels at lowering) widened inside the
# kernel; whole panels over the run's threads when the node was planned with threads, or two halves
# over the team of two, as the float linear splits a packed weight; then the activation. With bf16
# arithmetic (arith 1, native_bf16dot.h): x rounded to bf16 pairs into the instruction's buffer first,
# then the vdpbf16ps products (or their portable equal) over the pair panels, split the same way.
from libc.stdint cimport int64_t, uint16_t, uint32_t

cdef extern from "linear_half/native_half.h" nogil:
    void sj_half_packed(const float *x, Py_ssize_t ldx, int M, const uint16_t *wp, int bf, int K, int N,
                        const float *bias, float *y, Py_ssize_t ldy, int p0, int p1)
    Py_ssize_t sj_half_embedding(const int64_t *ids, Py_ssize_t n, const uint16_t *table, int bf, Py_ssize_t V,
                                 int D, float scale, const float *positions, Py_ssize_t L, float *out)
    int sj_half_pick()

cdef extern from "linear_half/native_bf16dot.h" nogil:
    void sj_bf16_round_rows(const float *x, Py_ssize_t ldx, int M, int K, uint32_t *xq)
    void sj_bf16_rows(const uint32_t *xq, int M, int K2, const uint32_t *wp, int N, const float *bias, float *y,
                      Py_ssize_t ldy, int p0, int p1)
    int sj_bf16_pick()
    int sj_bf16_native_off


cdef struct _HalfJob:
    const float* x
    Py_ssize_t ldx
    int M, K, N, mid, act, bf
    const uint16_t* w
    const uint32_t* xq
    const float* bias
    float* y
    Py_ssize_t ldy


cdef void _half_cols(_HalfJob* j, int n0, int n1) noexcept nogil:
    """Columns [n0, n1) of the product (n0 a multiple of SJ_PANEL, n1 too or N), activation included."""
    cdef int m
    if j.xq != NULL:
        sj_bf16_rows(j.xq, j.M, (j.K + 1) // 2, <const uint32_t*>j.w, j.N, j.bias, j.y, j.ldy, n0 // SJ_PANEL,
                     sj_panels(n1))
    else:
        sj_half_packed(j.x, j.ldx, j.M, j.w, j.bf, j.K, j.N, j.bias, j.y, j.ldy, n0 // SJ_PANEL, sj_panels(n1))
    if j.act != _NONE:
        for m in range(j.M):
            sj_act_row(j.y + m * j.ldy + n0, NULL, j.y + m * j.ldy + n0, n1 - n0, j.act)


cdef void _half_part(void* ctx, int part) noexcept nogil:
    """Columns [0, mid) (part 0) or [mid, N) (part 1) of a team-split linear_half."""
    cdef _HalfJob* j = <_HalfJob*>ctx
    if part == 0:
        _half_cols(j, 0, j.mid)
    else:
        _half_cols(j, j.mid, j.N)


cdef void native_linear_half(const float* x, Py_ssize_t ldx, int M, int K, const uint16_t* w, int bf, int N,
                             const float* bias, float* y, Py_ssize_t ldy, int act, int nthreads,
                             uint32_t* xq) noexcept nogil:
    """y[m, :N] = act(x[m, :K] @ widen(W)^T + bias) for m < M, W the uint16 [N, K] bits (bf: bfloat16,
    else fp16) in panels. ``nthreads``: 1, the run's OpenMP threads (blocks of whole panels), or TEAM
    (two halves of the panels). ``xq`` not NULL: bf16 arithmetic, W the bf16 pair panels, xq a buffer
    of M * ceil(K / 2) pairs for the rounded x."""
    cdef int t, n0, n1, chunk
    cdef _HalfJob job
    job.x, job.ldx, job.M, job.K, job.N, job.act, job.bf = x, ldx, M, K, N, act, bf
    job.w, job.bias, job.y, job.ldy, job.xq = w, bias, y, ldy, xq
    if xq != NULL:
        sj_bf16_round_rows(x, ldx, M, K, xq)
    if nthreads == TEAM and N >= 64:
        job.mid = min(N, sj_panels(N) // 2 * SJ_PANEL)
        sj_team_run(_half_part, &job)
    elif nthreads > 1 and N > SJ_PANEL:
        chunk = ((N + nthreads - 1) // nthreads + SJ_PANEL - 1) // SJ_PANEL * SJ_PANEL
        for t in prange(nthreads, nogil=True, num_threads=nthreads, schedule="static"):
            n0 = t * chunk
            n1 = N if n0 + chunk > N else n0 + chunk
            if n0 < n1:
                _half_cols(&job, n0, n1)
    else:
        _half_cols(&job, 0, N)


cdef inline int run_linear_half(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """OP_LINEAR_HALF (lowered by seqjit.graph.ops.half_ops' linear_half)."""
    native_linear_half(<float*>c.p[LINEAR_HALF_P_X], c.i[LINEAR_HALF_I_LDX], <int>c.i[LINEAR_HALF_I_M],
                       <int>c.i[LINEAR_HALF_I_K], <uint16_t*>c.p[LINEAR_HALF_P_W], <int>c.i[LINEAR_HALF_I_FMT],
                       <int>c.i[LINEAR_HALF_I_N], <float*>c.p[LINEAR_HALF_P_BIAS], <float*>c.p[LINEAR_HALF_P_Y],
                       c.i[LINEAR_HALF_I_LDY], <int>c.i[LINEAR_HALF_I_ACT], nt,
                       <uint32_t*>c.p[LINEAR_HALF_P_XQ] if c.i[LINEAR_HALF_I_ARITH] else NULL)
    return ERR_NONE


cdef inline int run_embedding_half(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """OP_EMBEDDING_HALF; ERR_ID (err[0]: the id) for an id outside the table."""
    cdef int64_t* ids = <int64_t*>c.p[EMBEDDING_HALF_P_IDS]
    cdef Py_ssize_t r = sj_half_embedding(
        ids, c.i[EMBEDDING_HALF_I_N], <uint16_t*>c.p[EMBEDDING_HALF_P_TABLE], <int>c.i[EMBEDDING_HALF_I_FMT],
        c.i[EMBEDDING_HALF_I_VOCAB], <int>c.i[EMBEDDING_HALF_I_D], <float>c.f[EMBEDDING_HALF_F_SCALE],
        <float*>c.p[EMBEDDING_HALF_P_POSITIONS], c.i[EMBEDDING_HALF_I_LENGTH], <float*>c.p[EMBEDDING_HALF_P_Y])
    if r >= 0:
        err[0] = ids[r]
        return ERR_ID
    return ERR_NONE
