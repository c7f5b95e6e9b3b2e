# Native layer_norm and rms_norm (T5) for the replay VM: ``include "layer_norm/_native.pxi"`` after linear/_native.pxi.
# Each row by sj_layer_norm_row (activations/native_act.h, compiled per instruction set): mean and
# variance in float64 (as the reference), two passes over a row that is in L1, each over 8
# independent lanes.


cdef void native_layer_norm(const float* x, Py_ssize_t ldx, float* y, Py_ssize_t ldy, int M, int D,
                            const float* g, const float* b, double eps) noexcept nogil:
    cdef int m
    for m in range(M):
        sj_layer_norm_row(x + m * ldx, y + m * ldy, D, g, b, eps)


cdef void native_rms_norm(const float* x, Py_ssize_t ldx, float* y, Py_ssize_t ldy, int M, int D,
                          const float* g, double eps) noexcept nogil:
    """T5's RMS norm of each row (sj_rms_norm_row: mean of squares in float64, no mean, no bias)."""
    cdef int m
    for m in range(M):
        sj_rms_norm_row(x + m * ldx, y + m * ldy, D, g, eps)


cdef inline int run_layer_norm(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    native_layer_norm(<float*>c.p[LAYER_NORM_P_X], c.i[LAYER_NORM_I_LDX], <float*>c.p[LAYER_NORM_P_Y],
                      c.i[LAYER_NORM_I_LDY], <int>c.i[LAYER_NORM_I_M], <int>c.i[LAYER_NORM_I_D],
                      <float*>c.p[LAYER_NORM_P_WEIGHT], <float*>c.p[LAYER_NORM_P_BIAS], c.f[LAYER_NORM_F_EPS])
    return ERR_NONE


cdef inline int run_rms_norm(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    native_rms_norm(<float*>c.p[RMS_NORM_P_X], c.i[RMS_NORM_I_LDX], <float*>c.p[RMS_NORM_P_Y],
                    c.i[RMS_NORM_I_LDY], <int>c.i[RMS_NORM_I_M], <int>c.i[RMS_NORM_I_D],
                    <float*>c.p[RMS_NORM_P_WEIGHT], c.f[RMS_NORM_F_EPS])
    return ERR_NONE
