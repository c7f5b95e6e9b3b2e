# Native linear_int8 for the replay VM: ``include "linear_int8/_native.pxi"`` after
# linear/_native.pxi (activations). The arithmetic of cython_cpu.pyx through the same C entry points
# of _qgemm.h: each x row quantized (per row, symmetric), exact int32 tiles, dequantize + bias in
# the tile epilogue, then the activation. Column blocks over threads when the node was planned
# with threads and the product is large.
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


cdef void native_linear_int8(const float* x, Py_ssize_t ldx, int M, int K, const int8_t* w, const float* ws,
                             int N, const float* bias, float* y, Py_ssize_t ldy, int act, int8_t* qx,
                             int32_t* xsum, float* xs, int nthreads) noexcept nogil:
    cdef int m, t
    cdef long blocks = (N + QBLOCK_COLS - 1) // QBLOCK_COLS, c0, c1
    cdef int isa = _native_qisa | (SJQ_STREAM if <long>N * K >= QSTREAM_BYTES else 0)
    for m in range(M):
        xs[m] = sjq_quantize_row(_native_qisa, x + m * ldx, K, qx + <Py_ssize_t>m * K, &xsum[m])
    if nthreads > 1 and blocks > 1:
        for t in prange(blocks, nogil=True, num_threads=nthreads, schedule="static"):
            c0 = t * QBLOCK_COLS
            c1 = N if c0 + QBLOCK_COLS > N else c0 + QBLOCK_COLS
            sjq_columns(isa, qx, K, xsum, xs, M, K, w, ws, bias, y, ldy, NULL, 0, c0, c1)
    else:
        sjq_columns(isa, qx, K, xsum, xs, M, K, w, ws, bias, y, ldy, NULL, 0, 0, N)
    if act != _NONE:
        for m in range(M):
            act_row_f32(y + m * ldy, NULL, y + m * ldy, N, act)
