# Native linear_int8 for the replay VM (seqjit.graph._native_vm): ``include "linear_int8/_native.pxi"``
# after ``include "linear/_native.pxi"`` (which brings act_row_f32 and the activation codes). The same C
# (linear_int8/_qgemm.h) and arithmetic as cython_cpu.pyx: x quantized per row into the caller's
# scratch, int32 tiles on the instruction set picked at import, dequantize + bias in C, then the
# activation; with ``nthreads`` > 1 the weight rows are split into 16-row-aligned column blocks.
from cython.parallel cimport prange
from libc.stdint cimport int8_t, int32_t

cdef extern from "linear_int8/_qgemm.h" nogil:
    int sjq_detect()
    float sjq_quantize_row(int isa, const float *x, long K, int8_t *q, int32_t *qsum)
    void sjq_columns(int isa, const int8_t *qx, long ldq, const int32_t *xsum, const float *xs, long M, long K,
                     const int8_t *w, const float *ws, const float *bias, float *out, long ldo, int32_t *acc,
                     long lda, long c0, long c1)

cdef int _sjq_isa = sjq_detect()


cdef inline void _int8_cols(const int8_t* qx, const int32_t* xsum, const float* xs, int M, int K, const int8_t* w,
                            const float* ws, const float* bias, float* y, Py_ssize_t ldy, int act, int n0,
                            int n1) noexcept nogil:
    cdef int m
    sjq_columns(_sjq_isa, qx, K, xsum, xs, M, K, w, ws, bias, y, ldy, NULL, 0, n0, n1)
    if act != _NONE:
        for m in range(M):
            act_row_f32(y + m * ldy + n0, NULL, y + m * ldy + n0, n1 - n0, act)


cdef void native_linear_int8(const float* x, Py_ssize_t ldx, int M, int K, const int8_t* w, int N, const float* ws,
                             const float* bias, float* y, Py_ssize_t ldy, int act, int nthreads, int8_t* qx,
                             int32_t* xsum, float* xs) noexcept nogil:
    """y[m, :N] = act(dequantize(q(x[m, :K]) @ W^T) + bias) for m < M (rows ldx / ldy apart); W int8
    [N, K] with scales ws [N]. Scratch: qx [M * K] int8, xsum [M] int32, xs [M] float32."""
    cdef int t, n0, n1, chunk, m
    for m in range(M):
        if K:
            xs[m] = sjq_quantize_row(_sjq_isa, x + m * ldx, K, qx + m * K, xsum + m)
        else:
            xs[m] = 0
            xsum[m] = 0
    if nthreads > 1:
        chunk = ((N + nthreads - 1) // nthreads + 15) // 16 * 16
        for t in prange(nthreads, nogil=True, num_threads=nthreads, schedule="static"):
            n0 = t * chunk
            n1 = N if n0 + chunk > N else n0 + chunk
            if n0 < n1:
                _int8_cols(qx, xsum, xs, M, K, w, ws, bias, y, ldy, act, n0, n1)
    else:
        _int8_cols(qx, xsum, xs, M, K, w, ws, bias, y, ldy, act, 0, N)
