"""NumPy reference for gru / lstm / gru_cell / lstm_cell: the readable specification.

See :mod:`spec` for shapes, the weight layout and the packed-sequence (``lengths``) semantics.
"""
from __future__ import annotations

import numpy as np

from . import spec


def _sigmoid(x):
    with np.errstate(over="ignore"):  # exp(-x) = inf for very negative x: 1 / inf = 0 is right
        return 1.0 / (1.0 + np.exp(-x))


def gru_gates(xg, hg, h):
    """One GRU update from the input part ``xg = W_ih x + b_ih`` and the hidden part
    ``hg = W_hh h + b_hh`` (both ``[B, 3H]``) and the previous state ``h`` ``[B, H]``."""
    H = h.shape[-1]
    r = _sigmoid(xg[:, :H] + hg[:, :H])
    z = _sigmoid(xg[:, H : 2 * H] + hg[:, H : 2 * H])
    n = np.tanh(xg[:, 2 * H :] + r * hg[:, 2 * H :])
    return (1 - z) * n + z * h


def lstm_gates(xg, hg, c):
    """One LSTM update: gates ``xg + hg`` ``[B, 4H]`` in the order i, f, g, o; returns ``(h', c')``."""
    H = c.shape[-1]
    a = xg + hg
    i, f, o = _sigmoid(a[:, :H]), _sigmoid(a[:, H : 2 * H]), _sigmoid(a[:, 3 * H :])
    g = np.tanh(a[:, 2 * H : 3 * H])
    c = f * c + i * g
    return o * np.tanh(c), c


def _affine(x, w, b):
    y = x @ w.T
    return y if b is None else y + b


def _run_direction(mode, x, d: spec.Direction, h, c, lengths, reverse, out):
    """Run one layer and direction over time-major ``x`` ``[T, B, I]``; write ``out`` ``[T, B, H]``
    (zeros at padded steps); return the final ``(h, c)``."""
    T, B, _ = x.shape
    xg_all = _affine(x, d.w_ih, d.b_ih)  # [T, B, G*H]: the input projection of every step at once
    out[...] = 0
    rows = np.arange(B)
    for s in range(T):
        active = s < lengths
        if not active.any():
            break
        t = np.where(active, lengths - 1 - s if reverse else s, 0)
        xg = xg_all[t, rows]
        hg = _affine(h, d.w_hh, d.b_hh)
        if mode == "gru":
            h_new, c_new = gru_gates(xg, hg, h), None
        else:
            h_new, c_new = lstm_gates(xg, hg, c)
            c = np.where(active[:, None], c_new, c)
        h = np.where(active[:, None], h_new, h)
        out[t[active], rows[active]] = h[active]
    return h, c


def _sequence(seq: spec.Sequence):
    T, B, _ = seq.shape
    H, D = seq.hidden, seq.num_directions
    dtype = seq.x.dtype
    layer_in = seq.x
    for k, layer in enumerate(seq.layers):
        layer_out = seq.output if k == seq.num_layers - 1 else np.empty((T, B, D * H), dtype)
        for d, weights in enumerate(layer):
            idx = k * D + d
            h = np.zeros((B, H), dtype) if seq.h0 is None else seq.h0[idx]
            c = None
            if seq.mode == "lstm":
                c = np.zeros((B, H), dtype) if seq.c0 is None else seq.c0[idx]
            part = np.empty((T, B, H), dtype)
            h, c = _run_direction(seq.mode, layer_in, weights, h, c, seq.lengths, d == 1, part)
            layer_out[:, :, d * H : (d + 1) * H] = part
            seq.h_n[idx] = h
            if c is not None:
                seq.c_n[idx] = c
        layer_in = layer_out
    return seq.result()


def gru(x, params, *, h0=None, lengths=None, batch_first=False):
    """Multi-layer (bi)directional GRU like ``nn.GRU``: x ``[T, B, I]`` (``[B, T, I]`` batch-first)
    -> ``(output [T, B, D*H], h_n [L*D, B, H])``."""
    return _sequence(spec.prepare_sequence("gru", x, params, h0, lengths, batch_first))


def lstm(x, params, *, state0=None, lengths=None, batch_first=False):
    """Multi-layer (bi)directional LSTM like ``nn.LSTM``: state0 = (h0, c0) ``[L*D, B, H]`` each
    -> ``(output [T, B, D*H], (h_n, c_n))``."""
    return _sequence(spec.prepare_sequence("lstm", x, params, state0, lengths, batch_first))


def _zeros_if_none(a, like):
    return np.zeros_like(like) if a is None else a


def gru_cell(x, h, w_ih, w_hh, b_ih=None, b_hh=None, *, out=None):
    """``nn.GRUCell``: x ``[B, I]``, h ``[B, H]`` (None = zeros) -> h' ``[B, H]``."""
    cell = spec.prepare_cell("gru", x, h, None, w_ih, w_hh, b_ih, b_hh, out)
    h = _zeros_if_none(cell.h, cell.h_out)
    cell.h_out[...] = gru_gates(_affine(cell.x, cell.w_ih, cell.b_ih), _affine(h, cell.w_hh, cell.b_hh), h)
    return cell.h_out


def lstm_cell(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    """``nn.LSTMCell``: x ``[B, I]``, h and c ``[B, H]`` (None = zeros) -> ``(h', c')``."""
    cell = spec.prepare_cell("lstm", x, h, c, w_ih, w_hh, b_ih, b_hh, None)
    h = _zeros_if_none(cell.h, cell.h_out)
    c = _zeros_if_none(cell.c, cell.c_out)
    h_new, c_new = lstm_gates(_affine(cell.x, cell.w_ih, cell.b_ih), _affine(h, cell.w_hh, cell.b_hh), c)
    cell.h_out[...] = h_new
    cell.c_out[...] = c_new
    return cell.h_out, cell.c_out
