# Native linear for the replay VM (seqjit.graph._native_vm): ``include "linear/_native.pxi"``.
# The kernels of native_gemv.h (dot products for "out_in" weights, the broadcast kernel for "in_out")
# and of native_packed.h (weights prepacked in panels, for more than SJ_GEMV_MAX_ROWS rows), on the
# calling thread unless the node was planned with threads (column blocks, or panels, per thread). Only a
# product of BLAS_MIN_MACS multiply-adds or more, planned with threads and given more than one,
# goes to BLAS sgemm written in place (see cython_cpu.pyx for the column-major trick), then bias +
# activation: BLAS threads are process-wide, and a caller held to one thread (a part of a batch
# split over threads) must not start them. Only scipy's OpenBLAS (the ``blas`` extra) is used
# there: without it the kernels here run those products too (kernels/_blas_ptrs.pxi). BLAS is kept for large
# products only: on 2-core VMs OpenBLAS took 200 us for a 10x128x512 product that the kernel
# here does in 20.
from cython.parallel cimport prange
include "_blas_ptrs.pxi"

include "activations/_act.pxi"

cdef extern from "activations/native_act.h" nogil:
    # the float32 row loops compiled per instruction set (Cython's act_row_f32 is baseline-only)
    void sj_act_row(const float *src, const float *bias, float *dst, Py_ssize_t n, int code)
    void sj_gru_gates_row(const float *xr, float *hr, const float *h, float *out, int H)
    void sj_lstm_gates_row(const float *xr, float *hr, const float *c, float *h_out, float *c_out, int H)
    void sj_softmax_row(float *s, int n, float scale)
    void sj_layer_norm_row(const float *x, float *y, int D, const float *g, const float *b, double eps)
    void sj_softmax_bias_row(float *s, const float *bias, int n, float scale)
    void sj_rms_norm_row(const float *x, float *y, int D, const float *g, double eps)
    void sj_mul_row(const float *a, const float *b, float *y, Py_ssize_t n)
    double sj_lse_f32(const float* s, Py_ssize_t n, float* top)  # log(sum exp(s - max)); *top = max

cdef extern from "linear/native_gemv.h" nogil:
    int SJ_GEMV_MAX_ROWS
    void sj_gemv_rows(const float *x, Py_ssize_t ldx, int M, const float *w, int K, const float *bias,
                      float *y, Py_ssize_t ldy, int n0, int n1)
    void sj_gemv_rows_in_out(const float *x, Py_ssize_t ldx, int M, const float *w, int K, int N,
                             const float *bias, float *y, Py_ssize_t ldy, int n0, int n1)
    int sj_gemv_isa
    int sj_gemv_best()
    int sj_gemv_pick()

cdef extern from "linear/native_packed.h" nogil:
    int SJ_PANEL
    int sj_panels(int N)
    void sj_packed_rows(const float *x, Py_ssize_t ldx, int M, const float *wp, int K, int N,
                        const float *bias, float *y, Py_ssize_t ldy, int p0, int p1)
    int sj_pk_scratch_off

#: ``layout`` of native_linear: W "in_out" [K, N], "out_in" [N, K] (so a bint ``out_in`` passes as
#: one of these two), or packed in panels (kernels/linear/packed.py)
DEF LAYOUT_IN_OUT = 0
DEF LAYOUT_OUT_IN = 1
DEF LAYOUT_PACKED = 2


cdef inline void _gemv_cols(const float* x, Py_ssize_t ldx, int M, int K, const float* w, int N, int layout,
                            const float* bias, float* y, Py_ssize_t ldy, int n0, int n1) noexcept nogil:
    """Columns [n0, n1) of the product; for a packed W, n0 and n1 are multiples of SJ_PANEL (or N)."""
    if layout == LAYOUT_PACKED:
        sj_packed_rows(x, ldx, M, w, K, N, bias, y, ldy, n0 // SJ_PANEL, sj_panels(n1))
    elif layout == LAYOUT_OUT_IN:
        sj_gemv_rows(x, ldx, M, w, K, bias, y, ldy, n0, n1)
    else:
        sj_gemv_rows_in_out(x, ldx, M, w, K, N, bias, y, ldy, n0, n1)


DEF BLAS_MIN_MACS = 1 << 26

cdef extern from "_runtime/native_team.h" nogil:  # kernels/_runtime/native_team.h: the caller + one worker
    ctypedef void (*sj_team_fn)(void *ctx, int part) noexcept nogil
    int sj_team_acquire()
    void sj_team_release()
    void sj_team_enter()
    void sj_team_leave()
    int sj_team_run(sj_team_fn fn, void *ctx)
    void sj_team_counts(long long *out)
    void sj_team_forgive()
    int sj_team_degraded()


cdef struct _LinearJob:
    const float* x
    Py_ssize_t ldx
    int M, K, N, mid, act
    const float* w
    int layout
    const float* bias
    float* y
    Py_ssize_t ldy


cdef void _linear_part(void* ctx, int part) noexcept nogil:
    """Columns [0, mid) (part 0) or [mid, N) (part 1) of a team-split linear, activation included."""
    cdef _LinearJob* j = <_LinearJob*>ctx
    cdef int n0 = 0 if part == 0 else j.mid
    cdef int n1 = j.mid if part == 0 else j.N
    cdef int m
    _gemv_cols(j.x, j.ldx, j.M, j.K, j.w, j.N, j.layout, j.bias, j.y, j.ldy, n0, n1)
    if j.act != _NONE:
        for m in range(j.M):
            sj_act_row(j.y + m * j.ldy + n0, NULL, j.y + m * j.ldy + n0, n1 - n0, j.act)


#: ``nthreads`` value meaning "split over the team" (native_team.h) for the nodes planned for it
DEF TEAM = -1


cdef void native_linear(const float* x, Py_ssize_t ldx, int M, int K, const float* w, int N, int layout,
                        const float* bias, float* y, Py_ssize_t ldy, int act, int nthreads) noexcept nogil:
    """y[m, :N] = act(x[m, :K] @ W^T + bias) for m < M (rows ldx / ldy apart), W in ``layout``
    (LAYOUT_*). ``nthreads``: 1, the run's OpenMP threads, or TEAM (the columns split in two halves
    with the team's worker; whole panels for a packed W). A packed W never goes to BLAS."""
    cdef int t, n0, n1, chunk, m
    cdef _LinearJob job
    if nthreads == TEAM:
        if N >= 64:
            job.x, job.ldx, job.M, job.K, job.N, job.act = x, ldx, M, K, N, act
            job.mid = (N // 2 + 31) // 32 * 32 if N >= 128 else (N // 2 + 15) // 16 * 16
            if layout == LAYOUT_PACKED:
                job.mid = min(N, sj_panels(N) // 2 * SJ_PANEL)
            job.w, job.layout, job.bias, job.y, job.ldy = w, layout, bias, y, ldy
            sj_team_run(_linear_part, &job)
            return
        nthreads = 1
    cdef float one = 1.0, zero = 0.0
    cdef int lda, ldxi = <int>ldx, ldyi = <int>ldy
    cdef char* ta
    cdef char* tn = b"N"
    if M <= SJ_GEMV_MAX_ROWS or nthreads <= 1 or <double>M * N * K < BLAS_MIN_MACS or layout == LAYOUT_PACKED \
            or not have_scipy_blas:
        if nthreads > 1:
            chunk = ((N + nthreads - 1) // nthreads + 15) // 16 * 16
            if layout == LAYOUT_PACKED:
                chunk = (chunk + SJ_PANEL - 1) // SJ_PANEL * SJ_PANEL
            for t in prange(nthreads, nogil=True, num_threads=nthreads, schedule="static"):
                n0 = t * chunk
                n1 = N if n0 + chunk > N else n0 + chunk
                if n0 < n1:
                    _gemv_cols(x, ldx, M, K, w, N, layout, bias, y, ldy, n0, n1)
        else:
            _gemv_cols(x, ldx, M, K, w, N, layout, bias, y, ldy, 0, N)
        if act != _NONE:
            for m in range(M):
                sj_act_row(y + m * ldy, NULL, y + m * ldy, N, act)
        return
    lda = K if layout == LAYOUT_OUT_IN else N
    ta = b"T" if layout == LAYOUT_OUT_IN else b"N"
    sgemm(ta, tn, &N, &M, &K, &one, <float*>w, &lda, <float*>x, &ldxi, &zero, y, &ldyi)
    if bias != NULL or act != _NONE:
        for m in range(M):
            sj_act_row(y + m * ldy, bias, y + m * ldy, N, act)


cdef inline int run_linear(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """OP_LINEAR (lowered by seqjit.graph.ops' linear)."""
    native_linear(<float*>c.p[LINEAR_P_X], c.i[LINEAR_I_LDX], <int>c.i[LINEAR_I_M], <int>c.i[LINEAR_I_K],
                  <float*>c.p[LINEAR_P_W], <int>c.i[LINEAR_I_N], <int>c.i[LINEAR_I_LAYOUT],
                  <float*>c.p[LINEAR_P_BIAS], <float*>c.p[LINEAR_P_Y], c.i[LINEAR_I_LDY], <int>c.i[LINEAR_I_ACT],
                  nt)
    return ERR_NONE
