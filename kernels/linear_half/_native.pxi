# Native linear_half and embedding_half for the replay VM: ``include "linear_half/_native.pxi"`` after
# linear/_native.pxi (activations, the team, TEAM, SJ_PANEL). The kernels of native_half.h: float32
# products over 16-bit weights (fp16 or bf16 bits, packed in panels at lowering) widened inside the
# kernel; whole panels over the run's threads when the node was planned with threads, or two halves
# over the team of two, as the float linear splits a packed weight; then the activation.
from libc.stdint cimport int64_t, uint16_t

cdef extern from "linear_half/native_half.h" nogil:
    void sj_half_packed(const float *x, Py_ssize_t ldx, int M, const uint16_t *wp, int bf, int K, int N,
                        const float *bias, float *y, Py_ssize_t ldy, int p0, int p1)
    Py_ssize_t sj_half_embedding(const int64_t *ids, Py_ssize_t n, const uint16_t *table, int bf, Py_ssize_t V,
                                 int D, float scale, const float *positions, Py_ssize_t L, float *out)
    int sj_half_pick()


cdef struct _HalfJob:
    const float* x
    Py_ssize_t ldx
    int M, K, N, mid, act, bf
    const uint16_t* w
    const float* bias
    float* y
    Py_ssize_t ldy


cdef void _half_cols(_HalfJob* j, int n0, int n1) noexcept nogil:
    """Columns [n0, n1) of the product (n0 a multiple of SJ_PANEL, n1 too or N), activation included."""
    cdef int m
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
                             const float* bias, float* y, Py_ssize_t ldy, int act, int nthreads) noexcept nogil:
    """y[m, :N] = act(x[m, :K] @ widen(W)^T + bias) for m < M, W the uint16 [N, K] bits (bf: bfloat16,
    else fp16) in panels. ``nthreads``: 1, the run's OpenMP threads (blocks of whole panels), or TEAM
    (two halves of the panels)."""
    cdef int t, n0, n1, chunk
    cdef _HalfJob job
    job.x, job.ldx, job.M, job.K, job.N, job.act, job.bf = x, ldx, M, K, N, act, bf
    job.w, job.bias, job.y, job.ldy = w, bias, y, ldy
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
    native_linear_half(<float*>c.p[0], c.i[3], <int>c.i[0], <int>c.i[1], <uint16_t*>c.p[1], <int>c.i[6],
                       <int>c.i[2], <float*>c.p[2], <float*>c.p[3], c.i[4], <int>c.i[5], nt)
    return ERR_NONE


cdef inline int run_embedding_half(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """OP_EMBEDDING_HALF; ERR_ID (err[0]: the id) for an id outside the table."""
    cdef Py_ssize_t r = sj_half_embedding(<int64_t*>c.p[0], c.i[0], <uint16_t*>c.p[1], <int>c.i[4], c.i[3],
                                          <int>c.i[1], <float>c.f[0], <float*>c.p[2], c.i[2], <float*>c.p[3])
    if r >= 0:
        err[0] = (<int64_t*>c.p[0])[r]
        return ERR_ID
    return ERR_NONE
