"""Numba CPU gru_recurrence_int8 / lstm_recurrence_int8 (see :mod:`.reference` for the arithmetic).

One jitted call runs the whole recurrence: per step the rows of h are quantized and multiplied by
the int8 ``w_hh`` with the quantization, int32 dot products and dequantize epilogue of
:mod:`seqjit.kernels.linear_int8.numba_cpu` (the same functions, so the int32 sums are the
reference's exactly), then the gate math of each running row with the float32 sigmoid/tanh of
:mod:`seqjit.kernels.rnn._nbmath`. No fast-math: the epilogue must round as the reference does.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from seqjit.kernels.linear_int8.numba_cpu import _dot, _out, _quantize
from seqjit.kernels.rnn._nbmath import sigmoid, tanh

from . import spec

_ONE = np.float32(1.0)


@njit(cache=True, error_model="numpy", nogil=True)
def _recurrence(xg, w, ws, bias, has_bias, h, c, lengths, reverse, lstm, out, sums, record):
    """Runs in place on the state ``h``/``c`` [B, H]; writes ``out`` [B, T, H] (zeroed here) and,
    when ``record``, the running rows' int32 sums of every step into ``sums`` [T, B, G*H]."""
    B, T, GH = xg.shape
    H = h.shape[1]
    qh = np.empty((B, H), np.int8)
    hs = np.empty(B, np.float32)
    qsum = np.empty(B, np.int32)
    hg = np.empty(GH, np.float32)
    out[:] = 0
    for s in range(T):
        running = False
        for b in range(B):
            running = running or s < lengths[b]
        if not running:
            break
        _quantize(h, qh, hs, qsum)
        if record:
            for b in range(B):
                for j in range(GH if s < lengths[b] else 0):
                    sums[s, b, j] = _dot(qh, b, w, j)
        for b in range(B):
            if s >= lengths[b]:
                continue
            t = lengths[b] - 1 - s if reverse else s
            for j in range(GH):
                hg[j] = _out(_dot(qh, b, w, j), hs[b], ws[j], bias[j], has_bias, 0)
            x = xg[b, t]
            for j in range(H):
                if lstm:
                    i = sigmoid(x[j] + hg[j])
                    f = sigmoid(x[H + j] + hg[H + j])
                    g = tanh(x[2 * H + j] + hg[2 * H + j])
                    o = sigmoid(x[3 * H + j] + hg[3 * H + j])
                    c[b, j] = f * c[b, j] + i * g
                    h[b, j] = o * tanh(c[b, j])
                else:
                    r = sigmoid(x[j] + hg[j])
                    z = sigmoid(x[H + j] + hg[H + j])
                    n = tanh(x[2 * H + j] + r * hg[2 * H + j])
                    h[b, j] = (_ONE - z) * n + z * h[b, j]
                out[b, t, j] = h[b, j]


def _run(r: spec.Recurrence):
    B, H = r.batch, r.hidden
    h = np.zeros((B, H), np.float32) if r.h0 is None else r.h0
    r.h_n[...] = h
    if r.lstm:
        r.c_n[...] = 0 if r.c0 is None else r.c0
    c = r.c_n if r.lstm else np.zeros((B, H), np.float32)
    bias = r.b_hh if r.b_hh is not None else r.scale
    sums = r.sums if r.sums is not None else np.zeros((0, 0, 0), np.int32)
    _recurrence(r.xg, r.w_hh, r.scale, bias, r.b_hh is not None, r.h_n, c, r.lengths, r.reverse, r.lstm, r.out, sums,
                r.sums is not None)
    return r.result()


def gru_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, lengths=None, reverse=False, sums=None):
    """See :func:`seqjit.kernels.rnn_int8.reference.gru_recurrence_int8`."""
    return _run(spec.prepare("gru", xg, w_hh, scale, b_hh, h0, None, lengths, reverse, sums))


def lstm_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, c0=None, lengths=None, reverse=False, sums=None):
    """See :func:`seqjit.kernels.rnn_int8.reference.lstm_recurrence_int8`."""
    return _run(spec.prepare("lstm", xg, w_hh, scale, b_hh, h0, c0, lengths, reverse, sums))
