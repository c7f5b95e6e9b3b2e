"""numba.cuda gru / lstm / gru_cell / lstm_cell (float32).

Per layer and direction: one tiled GEMM for the input projection of every step, then per step two
launches, the hidden GEMM ``h @ W_hh.T`` over the rows still running (16x16 shared-memory tiles, or
one thread per output when fewer than 16 rows run) and the fused gate kernel. The
state lives in device buffers between steps and the host only enqueues launches (it knows every
row's length, so the number of running rows per step needs no copy back). Rows are processed in
length order (longest first), so the running rows are always a prefix. ``batch_first`` input and
output are transposed on the device.

The cells (a decoder step) run as two linear launches (``x @ W_ih.T`` and ``h @ W_hh.T``: the GEMV
path of :mod:`seqjit.kernels.linear` for a decode batch) and one fused gate launch, with nothing sent
to the device but the launches: device inputs in, device states out.

Host arrays in -> host arrays out; any device array in -> device arrays out (see seqjit.kernels._cuda).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as _layout

from . import spec

_TILE = 16
_THREADS = 128


def _launch(kernel, n, *args):
    if n > 0:
        kernel[_cuda.grid_1d(n, _THREADS)](*args)


@cuda.jit(cache=False)
def _gemm_nt(a, b, c, m):
    """``c[:m] = a[:m] @ b.T``: a ``[>=m, K]``, b ``[N, K]``, c ``[>=m, N]``; 16x16 output tiles."""
    sa = cuda.shared.array((_TILE, _TILE + 1), float32)
    sb = cuda.shared.array((_TILE, _TILE + 1), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * _TILE + ty
    col = cuda.blockIdx.x * _TILE + tx
    brow = cuda.blockIdx.x * _TILE + ty
    n, k = b.shape
    acc = float32(0.0)
    for k0 in range(0, k, _TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < m and k0 + tx < k else float32(0.0)
        sb[ty, tx] = b[brow, k0 + tx] if brow < n and k0 + tx < k else float32(0.0)
        cuda.syncthreads()
        for kk in range(_TILE):
            acc += sa[ty, kk] * sb[tx, kk]
        cuda.syncthreads()
    if row < m and col < n:
        c[row, col] = acc


@cuda.jit(cache=False)
def _dot_rows(a, b, c, m):
    """``c[:m] = a[:m] @ b.T`` with one thread per output: for the few running rows of a decoder-sized
    batch, where 16x16 tiles would leave most threads idle."""
    idx = cuda.grid(1)
    n, k = b.shape
    if idx < m * n:
        i = idx // n
        g = idx - i * n
        acc = float32(0.0)
        for kk in range(k):
            acc += a[i, kk] * b[g, kk]
        c[i, g] = acc


_FEW_ROWS = 16  # below this many running rows the hidden GEMM uses _dot_rows


def _gemm(a, b, c, m):
    """``c[:m] = a[:m] @ b.T`` on the device."""
    if m <= 0:
        return
    if m < _FEW_ROWS:
        _launch(_dot_rows, m * b.shape[0], a, b, c, m)
    else:
        grid = ((b.shape[0] + _TILE - 1) // _TILE, (m + _TILE - 1) // _TILE)
        _gemm_nt[grid, (_TILE, _TILE)](a, b, c, m)


@cuda.jit(device=True, inline=True)
def _sigmoid(x):
    return float32(1.0) / (float32(1.0) + math.exp(-x))


@cuda.jit(device=True, inline=True)
def gru_unit(r_pre, z_pre, xn, hn, h):
    """h' of one GRU unit from its gate pre-activations (input + hidden projections, biases
    included; the n gate's input part ``xn`` and hidden part ``hn`` apart) and its state ``h``."""
    r = _sigmoid(r_pre)
    z = _sigmoid(z_pre)
    n = math.tanh(xn + r * hn)
    return n + z * (h - n)


@cuda.jit(device=True, inline=True)
def lstm_unit(i_pre, f_pre, g_pre, o_pre, c):
    """(h', c') of one LSTM unit from its four gate pre-activations and its cell state ``c``."""
    cn = _sigmoid(f_pre) * c + _sigmoid(i_pre) * math.tanh(g_pre)
    return _sigmoid(o_pre) * math.tanh(cn), cn


@cuda.jit(cache=False)
def _gates(xp, hh, bx, bh, hs, src, cs, lens, order, s, reverse, lstm, out, col, nact):
    """Fused gate math for running row i < nact and unit j; writes hs[1 - src], cs and out."""
    idx = cuda.grid(1)
    H = hs.shape[2]
    if idx >= nact * H:
        return
    i = idx // H
    j = idx - i * H
    B = hs.shape[1]
    row = order[i]
    t = lens[i] - 1 - s if reverse else s
    xr = t * B + row
    if lstm:
        v, cs[i, j] = lstm_unit(xp[xr, j] + bx[j] + hh[i, j] + bh[j],
                                xp[xr, H + j] + bx[H + j] + hh[i, H + j] + bh[H + j],
                                xp[xr, 2 * H + j] + bx[2 * H + j] + hh[i, 2 * H + j] + bh[2 * H + j],
                                xp[xr, 3 * H + j] + bx[3 * H + j] + hh[i, 3 * H + j] + bh[3 * H + j], cs[i, j])
    else:
        v = gru_unit(xp[xr, j] + bx[j] + hh[i, j] + bh[j], xp[xr, H + j] + bx[H + j] + hh[i, H + j] + bh[H + j],
                     xp[xr, 2 * H + j] + bx[2 * H + j], hh[i, 2 * H + j] + bh[2 * H + j], hs[src, i, j])
    hs[1 - src, i, j] = v
    out[t, row, col + j] = v


@cuda.jit(cache=False)
def _start(h_init, c_init, order, lengths, hs, cs, lens, out, col):
    """Gather the initial state into length order and zero the padded output steps."""
    idx = cuda.grid(1)
    T, B = out.shape[0], out.shape[1]
    H = hs.shape[2]
    if idx < B * H:
        i = idx // H
        j = idx - i * H
        hs[0, i, j] = h_init[order[i], j]
        cs[i, j] = c_init[order[i], j]
        if j == 0:
            lens[i] = lengths[order[i]]
    if idx < T * B * H:
        t = idx // (B * H)
        b = (idx // H) % B
        if t >= lengths[b]:
            out[t, b, col + idx % H] = float32(0.0)


@cuda.jit(cache=False)
def _finish(hs, cs, lens, order, h_fin, c_fin):
    """A row's final state sits in the buffer its own last step wrote."""
    idx = cuda.grid(1)
    B, H = hs.shape[1], hs.shape[2]
    if idx < B * H:
        i = idx // H
        j = idx - i * H
        last = 0 if lens[i] == 0 else 1 - (lens[i] - 1) % 2
        h_fin[order[i], j] = hs[last, i, j]
        c_fin[order[i], j] = cs[i, j]


@cuda.jit(cache=False)
def _swap01(x, y):
    """``y[b, a, :] = x[a, b, :]`` (batch-first <-> time-major)."""
    idx = cuda.grid(1)
    A, B, C = x.shape
    if idx < A * B * C:
        a = idx // (B * C)
        b = (idx // C) % B
        y[b, a, idx % C] = x[a, b, idx % C]


def _swapped(x):
    A, B, C = x.shape
    y = _cuda.device_empty((B, A, C), np.float32)
    _launch(_swap01, A * B * C, x, y)
    return y


def _zeros(shape):
    return _layout.zeros(shape, np.float32)


def _layer(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col, h_fin, c_fin):
    """One layer and direction on the device (arguments as in :mod:`._driver`, all device arrays
    except the host ``lengths``)."""
    B, H = h_init.shape
    T = out.shape[0]
    dlengths = _cuda.to_device(lengths)
    dorder = _cuda.to_device(order)
    hs = _cuda.device_empty((2, B, H), np.float32)
    cs = _cuda.device_empty((B, H), np.float32)
    lens = _cuda.device_empty((B,), np.int64)
    _launch(_start, max(B * H, T * B * H), h_init, c_init, dorder, dlengths, hs, cs, lens, out, col)
    if nsteps:
        xp = _cuda.device_empty((x2d.shape[0], w_hh.shape[0]), np.float32)
        hh = _cuda.device_empty((B, w_hh.shape[0]), np.float32)
        _gemm(x2d, w_ih, xp, x2d.shape[0])
        sorted_lengths = lengths[order]
        for s in range(nsteps):
            nact = int(np.count_nonzero(sorted_lengths > s))
            src = s % 2
            _gemm(hs[src], w_hh, hh, nact)
            _launch(_gates, nact * H, xp, hh, bx, bh, hs, src, cs, lens, dorder, s, reverse, lstm, out, col, nact)
    _launch(_finish, B * H, hs, cs, lens, dorder, h_fin, c_fin)


def _dev(x):
    return None if x is None else _cuda.to_device(x)


def _biases(w_hh, b_ih, b_hh):
    gh = w_hh.shape[0]
    return tuple(_zeros(gh) if b is None else _cuda.to_device(b) for b in (b_ih, b_hh))


def _check_f32(**arrays):
    for name, a in arrays.items():
        if a is not None:
            _cuda.require_float32(name, a)


def _sequence(mode, x, params, state0, lengths, batch_first):
    seq = spec.prepare_sequence(mode, x, params, state0, lengths, batch_first, device=True)
    weights = [a for layer in seq.layers for d in layer for a in (d.w_ih, d.w_hh, d.b_ih, d.b_hh)]
    on_device = _cuda.any_on_device(seq.x, seq.h0, seq.c0, *weights)
    _check_f32(x=seq.x)
    for k, layer in enumerate(seq.layers):
        for d, w in enumerate(layer):
            sfx = f"_l{k}" + ("_reverse" if d else "")
            _check_f32(**{f"params['weight_ih{sfx}']": w.w_ih, f"params['weight_hh{sfx}']": w.w_hh,
                          f"params['bias_ih{sfx}']": w.b_ih, f"params['bias_hh{sfx}']": w.b_hh})
    _check_f32(h0=seq.h0, c0=seq.c0)
    x = _cuda.to_device(seq.x)
    if seq.batch_first:
        x = _swapped(x)
    T, B, _ = x.shape
    H, D, L = seq.hidden, seq.num_directions, seq.num_layers
    h_n = _cuda.device_empty((L * D, B, H), np.float32)
    c_n = _cuda.device_empty((L * D, B, H), np.float32)
    h0 = _zeros((L * D, B, H)) if seq.h0 is None else _cuda.to_device(seq.h0)
    c0 = _zeros((L * D, B, H)) if seq.c0 is None else _cuda.to_device(seq.c0)
    order = seq.order()
    nsteps = int(seq.lengths.max()) if B else 0
    layer_in = x
    for k, layer in enumerate(seq.layers):
        layer_out = _cuda.device_empty((T, B, D * H), np.float32)
        for d, w in enumerate(layer):
            idx = k * D + d
            bx, bh = _biases(w.w_hh, w.b_ih, w.b_hh)
            _layer(layer_in.reshape(T * B, layer_in.shape[2]), _cuda.to_device(w.w_ih), _cuda.to_device(w.w_hh),
                   bx, bh, h0[idx], c0[idx], seq.lengths, order, nsteps, d == 1, mode == "lstm", layer_out,
                   d * H, h_n[idx], c_n[idx])
        layer_in = layer_out
    output = _swapped(layer_in) if seq.batch_first else layer_in
    if not on_device:
        output, h_n, c_n = output.copy_to_host(), h_n.copy_to_host(), c_n.copy_to_host()
    return (output, h_n) if mode == "gru" else (output, (h_n, c_n))


def gru(x, params, *, h0=None, lengths=None, batch_first=False):
    """See :func:`seqjit.kernels.rnn.reference.gru`."""
    return _sequence("gru", x, params, h0, lengths, batch_first)


def lstm(x, params, *, state0=None, lengths=None, batch_first=False):
    """See :func:`seqjit.kernels.rnn.reference.lstm`."""
    return _sequence("lstm", x, params, state0, lengths, batch_first)


@cuda.jit(cache=False)
def _cell_gates(xp, hh, h, c, has_h, has_c, lstm, h_out, c_out):
    """One cell step from the two projections (biases included): thread per (row, unit)."""
    idx = cuda.grid(1)
    B, H = h_out.shape
    if idx >= B * H:
        return
    i = idx // H
    j = idx - i * H
    if lstm:
        h_out[i, j], c_out[i, j] = lstm_unit(xp[i, j] + hh[i, j], xp[i, H + j] + hh[i, H + j],
                                             xp[i, 2 * H + j] + hh[i, 2 * H + j], xp[i, 3 * H + j] + hh[i, 3 * H + j],
                                             c[i, j] if has_c else float32(0.0))
    else:
        h_out[i, j] = gru_unit(xp[i, j] + hh[i, j], xp[i, H + j] + hh[i, H + j], xp[i, 2 * H + j], hh[i, 2 * H + j],
                               h[i, j] if has_h else float32(0.0))


def _cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, out):
    from seqjit.kernels.linear.cuda import linear

    cell = spec.prepare_cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, out, device=True)
    _check_f32(x=cell.x, h=cell.h, c=cell.c, w_ih=cell.w_ih, w_hh=cell.w_hh, b_ih=cell.b_ih, b_hh=cell.b_hh)
    on_device = _cuda.any_on_device(cell.x, cell.h, cell.c, cell.w_ih, cell.w_hh, cell.b_ih, cell.b_hh, out)
    B, H = cell.x.shape[0], cell.hidden
    G = cell.w_hh.shape[0]
    h_out = _cuda.device_out("out", out, (B, H), np.float32)
    c_out = _cuda.device_empty((B, H), np.float32)
    if B:
        xp = linear(_cuda.to_device(cell.x), _cuda.to_device(cell.w_ih), _dev(cell.b_ih),
                    out=_cuda.scratch("cell.xp", (B, G), np.float32))
        hh = _cuda.scratch("cell.hh", (B, G), np.float32)
        if cell.h is None:  # h = 0: the hidden projection is its bias
            linear(_cuda.device_empty((B, 0), np.float32), _cuda.device_empty((G, 0), np.float32), _dev(cell.b_hh), out=hh)
        else:
            linear(_cuda.to_device(cell.h), _cuda.to_device(cell.w_hh), _dev(cell.b_hh), out=hh)
        dh = _cuda.to_device(cell.h) if cell.h is not None else h_out
        dc = _cuda.to_device(cell.c) if cell.c is not None else c_out
        _launch(_cell_gates, B * H, xp, hh, dh, dc, cell.h is not None, cell.c is not None, mode == "lstm",
                h_out, c_out)
    h_res = _cuda.finish(h_out, out, on_device)
    if mode == "gru":
        return h_res
    return h_res, (c_out if on_device else c_out.copy_to_host())


def gru_cell(x, h, w_ih, w_hh, b_ih=None, b_hh=None, *, out=None):
    """See :func:`seqjit.kernels.rnn.reference.gru_cell`."""
    return _cell("gru", x, h, None, w_ih, w_hh, b_ih, b_hh, out)


def lstm_cell(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    """See :func:`seqjit.kernels.rnn.reference.lstm_cell`."""
    return _cell("lstm", x, h, c, w_ih, w_hh, b_ih, b_hh, None)
