"""numba.cuda gru_recurrence_int8 / lstm_recurrence_int8 (see :mod:`.reference` for the arithmetic).

Per step three launches: the rows of h quantized and multiplied by the int8 ``w_hh`` with the
dequantize + bias epilogue (the kernels of :mod:`seqjit.kernels.linear_int8.cuda`, so the int32 sums
are the reference's exactly), then one thread per (running row, unit) for the gate math, which
writes the state and the output in place. The state stays on the device between steps; the host
knows every length, so it stops after the longest row. Written for correctness (it is tested on the
CUDA simulator). Host arrays in -> host arrays out; any device array in -> device arrays out (see
seqjit.kernels._cuda).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from seqjit.kernels import _cuda
from seqjit.kernels.linear_int8.cuda import _DUMMY, _linear, _matmul, _quantize_rows

from seqjit.kernels.rnn.cuda import gru_unit, lstm_unit

from . import spec


@cuda.jit(cache=False)
def _gates(xg, hg, h, c, lengths, s, reverse, lstm, out):
    """Unit j of row b at step s (rows whose length is over keep their state)."""
    idx = cuda.grid(1)
    B, H = h.shape
    if idx >= B * H:
        return
    b = idx // H
    j = idx - b * H
    if s >= lengths[b]:
        return
    t = lengths[b] - 1 - s if reverse else s
    if lstm:
        v, c[b, j] = lstm_unit(xg[b, t, j] + hg[b, j], xg[b, t, H + j] + hg[b, H + j],
                               xg[b, t, 2 * H + j] + hg[b, 2 * H + j], xg[b, t, 3 * H + j] + hg[b, 3 * H + j], c[b, j])
    else:
        v = gru_unit(xg[b, t, j] + hg[b, j], xg[b, t, H + j] + hg[b, H + j], xg[b, t, 2 * H + j], hg[b, 2 * H + j],
                     h[b, j])
    h[b, j] = v
    out[b, t, j] = v


def _fresh(a, shape):
    """A new device array holding ``a`` (host or device), or zeros for None: the state is updated
    in place, and the caller's h0 / c0 must not be."""
    if a is None:
        return _cuda.to_device(np.zeros(shape, np.float32))
    if _cuda.is_device_array(a):
        d = _cuda.device_empty(shape, np.float32)
        d.copy_to_device(a)
        return d
    return _cuda.to_device(a.copy())


def _run(r: spec.Recurrence):
    on_device = _cuda.any_on_device(r.xg, r.w_hh, r.scale, r.b_hh, r.h0, r.c0)
    B, T, H = r.batch, r.steps, r.hidden
    GH = r.w_hh.shape[0]
    xg, w, ws = _cuda.to_device(r.xg), _cuda.to_device(r.w_hh), _cuda.to_device(r.scale)
    bias = _cuda.to_device(r.b_hh if r.b_hh is not None else _DUMMY)
    h, c = _fresh(r.h0, (B, H)), _fresh(r.c0, (B, H))
    out = _cuda.to_device(np.zeros((B, T, H), np.float32))
    lengths = _cuda.to_device(r.lengths)
    steps = int(r.lengths.max()) if B else 0
    if steps:
        qh = _cuda.device_empty((B, H), np.int8)
        hs = _cuda.device_empty((B,), np.float32)
        hg = _cuda.device_empty((B, GH), np.float32)
        for s in range(steps):
            _quantize_rows[_cuda.grid_1d(B, 64)](h, qh, hs)
            _linear[_cuda.grid_1d(B * GH)](qh, hs, w, ws, bias, r.b_hh is not None, 0, hg)
            if r.sums is not None:
                step_sums = _cuda.device_empty((B, GH), np.int32)
                _matmul[_cuda.grid_1d(B * GH)](qh, w, step_sums)
                r.sums[s] = np.where((s < r.lengths)[:, None], step_sums.copy_to_host(), 0)
            _gates[_cuda.grid_1d(B * H, 128)](xg, hg, h, c, lengths, s, r.reverse, r.lstm, out)
    if on_device:
        return r.result(out, h, c)
    return r.result(out.copy_to_host(), h.copy_to_host(), c.copy_to_host())


def gru_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, lengths=None, reverse=False, sums=None):
    """See :func:`seqjit.kernels.rnn_int8.reference.gru_recurrence_int8`."""
    return _run(spec.prepare("gru", xg, w_hh, scale, b_hh, h0, None, lengths, reverse, sums, device=True))


def lstm_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, c0=None, lengths=None, reverse=False, sums=None):
    """See :func:`seqjit.kernels.rnn_int8.reference.lstm_recurrence_int8`."""
    return _run(spec.prepare("lstm", xg, w_hh, scale, b_hh, h0, c0, lengths, reverse, sums, device=True))
