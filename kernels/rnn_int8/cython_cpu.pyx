# cython: language_level=3
"""Cython CPU gru_recurrence_int8 / lstm_recurrence_int8 (see :mod:`.reference` for the arithmetic).

The recurrence is ``_recurrence.pxi``, the C loop the native replay VM runs too: per step every row
of h quantized and multiplied by the int8 ``w_hh`` through the C entry points of
``linear_int8/_qgemm.h`` (AVX512-VNNI / AVX2 / portable, the path ``linear_int8`` uses: the same
exact int32 sums), dequantized with the bias, then the gate rows below (the vectorisable float32
sigmoid/tanh of ``_vecmath.pxi``). A step's product uses OpenMP threads (``seqjit.set_num_threads``)
when it has more than :data:`PARALLEL_MACS` multiply-adds. The GIL is released throughout.
"""
import numpy as np

from libc.stdint cimport int8_t, int32_t, int64_t
from libc.string cimport memcpy, memset
from cython.parallel cimport prange

from seqjit.kernels._threads import get_num_threads
from seqjit.kernels.linear_int8 import cython_cpu as _linear_int8

from . import spec

include "../_vecmath.pxi"

cdef extern from "../linear_int8/_qgemm.h" nogil:
    int SJQ_PORTABLE
    int SJQ_AVX2
    int SJQ_VNNI
    int sjq_detect()
    int sjq_clamp_isa(int isa)
    float sjq_quantize_row(int isa, const float *x, long K, int8_t *q, int32_t *qsum)
    void sjq_columns(int isa, const int8_t *qx, long ldq, const int32_t *xsum, const float *xs, long M, long K,
                     const int8_t *w, const float *ws, const float *bias, float *out, long ldo, int32_t *acc,
                     long lda, long c0, long c1)

#: a step's hidden product (B * G*H * H multiply-adds) above this uses OpenMP threads
PARALLEL_MACS = 1 << 20

ISA_NAMES = _linear_int8.ISA_NAMES
cdef int _isa = sjq_detect()


def isa() -> str:
    """The instruction-set path of the int8 products: "avx512_vnni", "avx2" or "portable"."""
    return ISA_NAMES[_isa]


def use_isa(name) -> str:
    """Use the path ``name`` (None: the best this CPU has; a path it lacks falls back to the best
    below it), as ``linear_int8.cython_cpu.use_isa``; returns the path now in use."""
    global _isa
    _isa = _linear_int8.isa_code(name)
    return isa()


cdef inline void gru_gates_row(const float* xr, float* hr, const float* h, float* out, int H) noexcept nogil:
    """xr: [r | z | n] input projections (read only), hr: the hidden ones (overwritten: the gates go
    there); out = h' (may be h). The arithmetic of activations/native_act_body.h's row."""
    cdef int j
    cdef const float* xn = xr + 2 * H
    cdef float* zg = hr + H
    cdef float* ng = hr + 2 * H
    for j in range(2 * H):
        hr[j] = sigmoid_f32(xr[j] + hr[j])
    for j in range(H):
        ng[j] = tanh_f32(xn[j] + hr[j] * ng[j])
    for j in range(H):
        out[j] = (<float>1.0 - zg[j]) * ng[j] + zg[j] * h[j]


cdef inline void lstm_gates_row(const float* xr, float* hr, const float* c, float* h_out, float* c_out,
                                int H) noexcept nogil:
    """xr: [i | f | g | o] input projections (read only), hr: the hidden ones (overwritten); c_out
    may be c."""
    cdef int j
    cdef float* fg = hr + H
    cdef float* gg = hr + 2 * H
    cdef float* og = hr + 3 * H
    for j in range(4 * H):
        hr[j] = xr[j] + hr[j]
    for j in range(2 * H):
        hr[j] = sigmoid_f32(hr[j])
    for j in range(H):
        gg[j] = tanh_f32(gg[j])
    for j in range(H):
        og[j] = sigmoid_f32(og[j])
    for j in range(H):
        c_out[j] = fg[j] * c[j] + hr[j] * gg[j]
    for j in range(H):
        h_out[j] = og[j] * tanh_f32(c_out[j])


include "_recurrence.pxi"


def _run(r):
    cdef int B = r.batch, T = r.steps, H = r.hidden
    cdef int G = 4 if r.lstm else 3
    if B == 0:
        return r.result()
    cdef const float[:, :, ::1] xg = r.xg
    cdef const int8_t[:, ::1] w = r.w_hh
    cdef const float[::1] ws = r.scale
    cdef const float[::1] bv
    cdef const float[:, ::1] h0v
    cdef const float[:, ::1] c0v
    cdef const int64_t[::1] lens = r.lengths
    cdef float[:, :, ::1] out = r.out
    cdef float[:, ::1] h = r.h_n
    cdef float[:, ::1] c = r.c_n if r.lstm else np.empty((B, H), np.float32)
    cdef const float* bp = NULL
    cdef const float* h0p = NULL
    cdef const float* c0p = NULL
    if r.b_hh is not None:
        bv = r.b_hh
        bp = &bv[0]
    if r.h0 is not None:
        h0v = r.h0
        h0p = &h0v[0, 0]
    if r.c0 is not None:
        c0v = r.c0
        c0p = &c0v[0, 0]
    cdef float[::1] scratch = np.empty(B * G * H + 4 * B + 2 * B * H, np.float32)
    cdef int8_t[::1] qh = np.empty(B * H, np.int8)
    cdef int threads = get_num_threads() if <long>B * G * H * H > PARALLEL_MACS else 1
    cdef bint lstm = r.lstm, reverse = r.reverse
    cdef int32_t[:, :, ::1] sv
    cdef int32_t* sp = NULL
    if r.sums is not None and T:
        sv = r.sums
        sp = &sv[0, 0, 0]
    with nogil:
        int8_recurrence(lstm, &xg[0, 0, 0] if T else NULL, G * H, B, T, H, &w[0, 0], &ws[0], bp, h0p, c0p,
                        &lens[0], reverse, &out[0, 0, 0] if T else NULL, &h[0, 0], &c[0, 0], &scratch[0], &qh[0],
                        _isa, threads, sp)
    return r.result()


def gru_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, lengths=None, reverse=False, sums=None):
    """See :func:`seqjit.kernels.rnn_int8.reference.gru_recurrence_int8`."""
    return _run(spec.prepare("gru", xg, w_hh, scale, b_hh, h0, None, lengths, reverse, sums))


def lstm_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, c0=None, lengths=None, reverse=False, sums=None):
    """See :func:`seqjit.kernels.rnn_int8.reference.lstm_recurrence_int8`."""
    return _run(spec.prepare("lstm", xg, w_hh, scale, b_hh, h0, c0, lengths, reverse, sums))
