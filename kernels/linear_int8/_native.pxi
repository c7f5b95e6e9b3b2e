# Native linear_int8 for the replay VM: ``include "linear_int8/_native.pxi"`` after
# linear/_native.pxi (activations). The arithmetic of cython_cpu.pyx through the same C entry points
# of _qgemm.h: each x row quantized (per row, symmetric), exact int32 tiles, dequantize + bias in
# the tile epilogue, then the activation. Column blocks over threads when the node was planned
# with threads and the product is large, or two column halves over the team of two (native_team.h).
from libc.stdint cimport int8_t, int32_t

cdef extern from "linear_int8/_qgemm.h" nogil:
    int SJQ_STREAM
    int sjq_detect()
    float sjq_quantize_row(int isa, const float *x, long K, int8_t *q, int32_t *qsum)
    void sjq_columns(int isa, const int8_t *qx, long ldq, const int32_t *xsum, const float *xs, long M, long K,
                     const int8_t *w, const float *ws, const float *bias, float *out, long ldo, int32_t *acc,
                     long lda, long c0, long c1)

cdef int _native_qisa = sjq_detect()
DEF QBLOCK_COLS = 64
# weights of at least this many bytes are prefetched ahead by every tile (SJQ_STREAM), not only by one-row
# tiles: in a decode step every weight comes from memory (a Marian-sized model is larger than the caches;
# 16 x 512 x 512 products: decoder layers 2.6 -> 1.7 ms per batch-16 step, benchmarks/int8/decode_step.c)
DEF QSTREAM_BYTES = 1 << 18


cdef struct _QLinearJob:
    int isa, M, K, N, mid, act
    const int8_t* qx
    const int32_t* xsum
    const float* xs
    const int8_t* w
    const float* ws
    const float* bias
    float* y
    Py_ssize_t ldy


cdef void _qlinear_cols(_QLinearJob* j, long c0, long c1) noexcept nogil:
    """Columns c0:c1 of the product of the quantized rows, dequantized, biased and activated."""
    cdef int m
    sjq_columns(j.isa, j.qx, j.K, j.xsum, j.xs, j.M, j.K, j.w, j.ws, j.bias, j.y, j.ldy, NULL, 0, c0, c1)
    if j.act != _NONE:
        for m in range(j.M):
            sj_act_row(j.y + m * j.ldy + c0, NULL, j.y + m * j.ldy + c0, c1 - c0, j.act)


cdef void _qlinear_part(void* ctx, int part) noexcept nogil:
    """Columns [0, mid) (part 0) or [mid, N) (part 1) of a team-split int8 linear."""
    cdef _QLinearJob* j = <_QLinearJob*>ctx
    if part == 0:
        _qlinear_cols(j, 0, j.mid)
    else:
        _qlinear_cols(j, j.mid, j.N)


cdef void native_linear_int8(const float* x, Py_ssize_t ldx, int M, int K, const int8_t* w, const float* ws,
                             int N, const float* bias, float* y, Py_ssize_t ldy, int act, int8_t* qx,
                             int32_t* xsum, float* xs, int nthreads) noexcept nogil:
    """``nthreads``: 1, the run's OpenMP threads (column blocks), or TEAM (two column halves, the
    second for the team's worker: linear/_native.pxi)."""
    cdef int m
    cdef long t, blocks = (N + QBLOCK_COLS - 1) // QBLOCK_COLS, c0, c1
    cdef _QLinearJob job
    job.isa = _native_qisa | (SJQ_STREAM if <long>N * K >= QSTREAM_BYTES else 0)
    job.M, job.K, job.N, job.act = M, K, N, act
    job.qx, job.xsum, job.xs, job.w, job.ws, job.bias, job.y, job.ldy = qx, xsum, xs, w, ws, bias, y, ldy
    for m in range(M):
        xs[m] = sjq_quantize_row(_native_qisa, x + m * ldx, K, qx + <Py_ssize_t>m * K, &xsum[m])
    if nthreads == TEAM and N >= 64:
        job.mid = (N // 2 + 31) // 32 * 32
        sj_team_run(_qlinear_part, &job)
    elif nthreads > 1 and blocks > 1:
        for t in prange(blocks, nogil=True, num_threads=nthreads, schedule="static"):
            c0 = t * QBLOCK_COLS
            c1 = N if c0 + QBLOCK_COLS > N else c0 + QBLOCK_COLS
            _qlinear_cols(&job, c0, c1)
    else:
        _qlinear_cols(&job, 0, N)


cdef inline int run_linear_int8(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    native_linear_int8(<float*>c.p[LINEAR_INT8_P_X], c.i[LINEAR_INT8_I_LDX], <int>c.i[LINEAR_INT8_I_M],
                       <int>c.i[LINEAR_INT8_I_K], <int8_t*>c.p[LINEAR_INT8_P_W], <float*>c.p[LINEAR_INT8_P_SCALE],
                       <int>c.i[LINEAR_INT8_I_N], <float*>c.p[LINEAR_INT8_P_BIAS], <float*>c.p[LINEAR_INT8_P_Y],
                       c.i[LINEAR_INT8_I_LDY], <int>c.i[LINEAR_INT8_I_ACT], <int8_t*>c.p[LINEAR_INT8_P_QX],
                       <int32_t*>c.p[LINEAR_INT8_P_XSUM], <float*>c.p[LINEAR_INT8_P_XS], nt)
    return ERR_NONE


cdef inline bint team_linear_int8(Instr* c) noexcept nogil:
    """Whether a run of two threads holding the team gives it this product (seqjit.graph.opcodes.TEAM_IF):
    at decode rows (up to 4), planned like the float products."""
    return c.i[LINEAR_INT8_I_M] <= 4
