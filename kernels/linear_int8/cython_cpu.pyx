# cython: language_level=3
"""Cython CPU linear_int8: per-row int8 quantization of x, int8 x int8 -> int32 tiles, and the fused
dequantize + bias + activation epilogue, in C (``_qgemm.h``) with three instruction-set paths
picked at import from the CPU's features: AVX512-VNNI (``vpdpbusd``), AVX2 (``vpmaddubsw`` /
``vpmaddwd`` with the sign trick) and portable C. Every path gives the reference's exact int32 sums.

The output is computed in column blocks of :data:`BLOCK_COLS` weight rows: within a block, 8 weight
rows at a time (they stay in L1) against every row of x, 4 x rows per tile, then the epilogue over the
block. Products of more than :data:`PARALLEL_MACS` multiply-adds split the blocks over OpenMP threads
(``seqjit.set_num_threads``); smaller ones run on the calling thread (a batch-1 decode step's
projections: starting threads costs more than the product). The GIL is released throughout.
"""
import numpy as np

from libc.stdint cimport int8_t, int32_t
from libc.stdlib cimport malloc, free
from cython.parallel cimport prange

from seqjit.kernels._threads import get_num_threads

from . import spec

include "../activations/_act.pxi"

cdef extern from "_qgemm.h" nogil:
    int SJQ_PORTABLE
    int SJQ_AVX2
    int SJQ_VNNI
    int SJQ_STREAM
    int sjq_detect()
    int sjq_clamp_isa(int isa)
    float sjq_quantize_row(int isa, const float *x, long K, int8_t *q, int32_t *qsum)
    void sjq_columns(int isa, const int8_t *qx, long ldq, const int32_t *xsum, const float *xs, long M, long K,
                     const int8_t *w, const float *ws, const float *bias, float *out, long ldo, int32_t *acc,
                     long lda, long c0, long c1)

#: weight rows per block (one OpenMP task)
BLOCK_COLS = 64
#: products with more multiply-adds than this (M * N * K) use OpenMP threads
PARALLEL_MACS = 1 << 20
#: weights of at least this many bytes are streamed from memory: every tile prefetches them ahead
STREAM_BYTES = 1 << 21

ISA_NAMES = {SJQ_PORTABLE: "portable", SJQ_AVX2: "avx2", SJQ_VNNI: "avx512_vnni"}
cdef int _isa = sjq_detect()


def isa() -> str:
    """The instruction-set path in use: "avx512_vnni", "avx2" or "portable"."""
    return ISA_NAMES[_isa]


def use_isa(name) -> str:
    """Use the path ``name`` (or the best this CPU has, for None); a path the CPU lacks falls back to
    the best one below it. Returns the name of the path now in use (tests run every path this way)."""
    global _isa
    _isa = isa_code(name)
    return isa()


def isa_code(name) -> int:
    """The code of path ``name`` as this CPU can run it (None: its best; a path it lacks: the best
    one below it); ValueError for an unknown name. Shared with kernels/rnn_int8."""
    codes = {v: k for k, v in ISA_NAMES.items()}
    if name is not None and name not in codes:
        raise ValueError(f"isa must be one of {', '.join(map(repr, codes))} or None, got {name!r}")
    return sjq_detect() if name is None else sjq_clamp_isa(codes[name])


cdef void _block(int isa, const int8_t* qx, const int32_t* xsum, const float* xs, long M, long K,
                 const int8_t* w, const float* ws, const float* bias, int code, float* out, int32_t* acc,
                 long N, long c0, long c1) noexcept nogil:
    """Columns ``c0:c1`` of the output: int32 sums into ``acc`` (when not NULL), else dequantized,
    biased and activated into ``out``."""
    cdef long i
    sjq_columns(isa, qx, K, xsum, xs, M, K, w, ws, bias, out, N, acc, N, c0, c1)
    if acc == NULL and code != 0:
        for i in range(M):
            act_row_f32(out + i * N + c0, NULL, out + i * N + c0, c1 - c0, code)


cdef void _product(int isa, const int8_t* qx, const int32_t* xsum, const float* xs, long M, long K,
                   const int8_t* w, const float* ws, const float* bias, int code, float* out, int32_t* acc,
                   long N, int threads, long cols, long parallel_macs, long stream_bytes) noexcept nogil:
    cdef long blocks = (N + cols - 1) // cols, t
    if N * K >= stream_bytes:
        isa = isa | SJQ_STREAM
    if threads > 1 and M * N * K > parallel_macs and blocks > 1:
        for t in prange(blocks, schedule="static", num_threads=threads, nogil=True):
            _block(isa, qx, xsum, xs, M, K, w, ws, bias, code, out, acc, N, t * cols, min(N, (t + 1) * cols))
    else:
        _block(isa, qx, xsum, xs, M, K, w, ws, bias, code, out, acc, N, 0, N)


def quantize_int8(x):
    """See :func:`seqjit.kernels.linear_int8.reference.quantize_int8`."""
    x2, q2, s1, q, scale = spec.prepare_quantize(x)
    cdef const float[:, ::1] xv = x2
    cdef int8_t[:, ::1] qv = q2
    cdef float[::1] sv = s1
    cdef long M = xv.shape[0], K = xv.shape[1], m
    cdef int32_t qsum
    cdef int path = _isa
    if M == 0 or K == 0:
        s1[...] = 0
        return q, scale
    with nogil:
        for m in range(M):
            sv[m] = sjq_quantize_row(path, &xv[m, 0], K, &qv[m, 0], &qsum)
    return q, scale


def matmul_int8(qx, qw):
    """See :func:`seqjit.kernels.linear_int8.reference.matmul_int8`."""
    qx, qw, out = spec.prepare_matmul(qx, qw)
    cdef long M = qx.shape[0], K = qx.shape[1], N = qw.shape[0], m, k
    if M == 0 or N == 0:
        return out
    if K == 0:
        out[...] = 0
        return out
    cdef const int8_t[:, ::1] xv = qx
    cdef const int8_t[:, ::1] wv = qw
    cdef int32_t[:, ::1] ov = out
    cdef int32_t[::1] xsum = np.zeros(M, np.int32)
    cdef int threads = get_num_threads(), path = _isa
    cdef long cols = BLOCK_COLS, parallel_macs = PARALLEL_MACS, stream_bytes = STREAM_BYTES
    with nogil:
        for m in range(M):
            for k in range(K):
                xsum[m] += xv[m, k]
        _product(path, &xv[0, 0], &xsum[0], NULL, M, K, &wv[0, 0], NULL, NULL, 0, NULL, &ov[0, 0], N, threads, cols,
                 parallel_macs, stream_bytes)
    return out


def linear_int8(x, weight, scale, bias=None, *, activation=None, out=None):
    """See :func:`seqjit.kernels.linear_int8.reference.linear_int8`."""
    x2, w, ws, b, code, o2, result = spec.prepare_linear(x, weight, scale, bias, activation, out)
    cdef long M = o2.shape[0], N = o2.shape[1], K = x2.shape[1], m
    if M == 0 or N == 0:
        return result
    cdef const float[:, ::1] xv = x2
    cdef const int8_t[:, ::1] wv = w
    cdef const float[::1] wsv = ws
    cdef const float[::1] bv
    cdef float[:, ::1] ov = o2
    cdef const float* bp = NULL
    cdef int threads = get_num_threads(), path = _isa
    cdef long cols = BLOCK_COLS, parallel_macs = PARALLEL_MACS, stream_bytes = STREAM_BYTES
    cdef int act = code
    if b is not None:
        bv = b
        bp = &bv[0]
    cdef int8_t* qx = <int8_t*>malloc(max(1, M * K))
    cdef int32_t* xsum = <int32_t*>malloc(M * sizeof(int32_t))
    cdef float* xs = <float*>malloc(M * sizeof(float))
    if qx == NULL or xsum == NULL or xs == NULL:
        free(qx)
        free(xsum)
        free(xs)
        raise MemoryError()
    with nogil:
        for m in range(M):
            if K:
                xs[m] = sjq_quantize_row(path, &xv[m, 0], K, qx + m * K, xsum + m)
            else:
                xs[m] = 0
                xsum[m] = 0
        _product(path, qx, xsum, xs, M, K, &wv[0, 0], &wsv[0], bp, act, &ov[0, 0],
                 NULL, N, threads, cols, parallel_macs, stream_bytes)
    free(qx)
    free(xsum)
    free(xs)
    return result
