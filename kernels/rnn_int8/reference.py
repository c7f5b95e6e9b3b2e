"""NumPy reference for gru_recurrence_int8 / lstm_recurrence_int8: the readable specification.

Shapes, the packed-sequence semantics and the layer decomposition are in :mod:`.spec`. Per step s,
for every row (rows past their length keep their state)::

    hg = linear_int8(h, w_hh, scale, b_hh)      # seqjit.kernels.linear_int8.reference: h quantized
                                                # per row, exact int32 sums, dequantize + bias
    h' = gru_gates(xg[b, t], hg, h)             # seqjit.kernels.rnn.reference, in float32
    h', c' = lstm_gates(xg[b, t], hg, c)

with t = s, or ``lengths[b] - 1 - s`` when ``reverse``. Every backend reproduces the int32 sums
exactly (the same quantization and products as ``linear_int8``) and the gates to float32 rounding
(their sigmoid/tanh differ from NumPy's by a few ulps).
"""
from __future__ import annotations

import numpy as np

from seqjit.kernels.linear_int8.reference import linear_int8, matmul_int8, quantize_int8
from seqjit.kernels.rnn.reference import gru_gates, lstm_gates

from . import spec


def _run(r: spec.Recurrence):
    B, T, H = r.batch, r.steps, r.hidden
    h = np.zeros((B, H), np.float32) if r.h0 is None else r.h0.copy()
    c = np.zeros((B, H), np.float32) if r.c0 is None else r.c0.copy()
    r.out[...] = 0
    rows = np.arange(B)
    for s in range(T):
        active = s < r.lengths
        if not active.any():
            break
        t = np.where(active, r.lengths - 1 - s if r.reverse else s, 0)
        xg = r.xg[rows, t]
        hg = linear_int8(h, r.w_hh, r.scale, r.b_hh)
        if r.sums is not None:
            r.sums[s, active] = matmul_int8(quantize_int8(h[active])[0], r.w_hh)
        if r.lstm:
            h_new, c_new = lstm_gates(xg, hg, c)
            c = np.where(active[:, None], c_new, c)
        else:
            h_new = gru_gates(xg, hg, h)
        h = np.where(active[:, None], h_new, h)
        r.out[rows[active], t[active]] = h[active]
    r.h_n[...] = h
    if r.lstm:
        r.c_n[...] = c
    return r.result()


def gru_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, lengths=None, reverse=False, sums=None):
    """GRU recurrence over input projections ``xg`` ``[B, T, 3H]`` -> ``(out [B, T, H], h_n [B, H])``."""
    return _run(spec.prepare("gru", xg, w_hh, scale, b_hh, h0, None, lengths, reverse, sums))


def lstm_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, c0=None, lengths=None, reverse=False, sums=None):
    """LSTM recurrence over input projections ``xg`` ``[B, T, 4H]`` -> ``(out, h_n, c_n)``."""
    return _run(spec.prepare("lstm", xg, w_hh, scale, b_hh, h0, c0, lengths, reverse, sums))
