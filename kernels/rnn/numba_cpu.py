"""Numba CPU gru / lstm / gru_cell / lstm_cell.

Per layer and direction one jitted call (:func:`_layer_jit`) does everything: the input projection of
all steps as one parallel GEMM, then the whole time loop. Each step is one parallel loop in which
every worker owns the same contiguous blocks of hidden units for the whole sequence; for each block
it computes that block's rows of the hidden GEMM ``h @ W_hh.T`` for every gate and then applies the
fused gate math to those units straight away. Both GEMMs use the register-blocked 4x4 kernel of
:mod:`._nbgemm` (no BLAS: one thread pool). Odd steps walk a worker's blocks backwards, so the W_hh
rows it used last, still in its L2, come first. Nothing is allocated inside the loop. Rows are
processed sorted by length, so the rows still running at step s are a prefix of the batch.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from . import _driver, spec
from ._nbgemm import FASTMATH as _FM
from ._nbgemm import dot_rows
from ._nbmath import sigmoid, tanh

_UNITS = 64  # hidden units per work block (measured: 64 beats 16 by 8-20% at B=1 and 32)
_TILE_ROWS = 128  # input rows per tile of the input projection


@njit(parallel=True, fastmath=_FM, cache=True)
def _layer_jit(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col, h_fin, c_fin,
               workers):
    """One layer and direction on ``workers`` threads; see :mod:`._driver` for the other arguments."""
    B, H = h_init.shape
    gates = w_hh.shape[0] // H
    T = x2d.shape[0] // B if B else 0
    for b in range(B):  # padded output steps are zero
        for t in range(lengths[b], T):
            out[t, b, col : col + H] = 0
    if nsteps == 0:
        h_fin[:] = h_init
        c_fin[:] = c_init
        return
    GH = w_hh.shape[0]
    M = x2d.shape[0]
    xp = np.empty((M, GH), h_init.dtype)  # [T*B, G*H]: every step's input projection
    ntn = (GH + _UNITS - 1) // _UNITS
    ntm = (M + _TILE_ROWS - 1) // _TILE_ROWS
    for tile in prange(ntn * ntm):
        n0 = (tile % ntn) * _UNITS
        m0 = (tile // ntn) * _TILE_ROWS
        dot_rows(w_ih, n0, min(GH, n0 + _UNITS), x2d, m0, min(M, m0 + _TILE_ROWS) - m0, xp, m0, n0)
    hh = np.empty((B, GH), h_init.dtype)  # hidden projection of the running rows
    hs = np.empty((2 * B, H), h_init.dtype)  # double-buffered state (rows src*B ...), rows in `order`
    cs = np.empty((B, H), h_init.dtype)
    lens = np.empty(B, np.int64)
    for i in range(B):
        lens[i] = lengths[order[i]]
        hs[i] = h_init[order[i]]
        cs[i] = c_init[order[i]]
    nblocks = (H + _UNITS - 1) // _UNITS
    nth = max(1, min(workers, nblocks))
    nact = B
    for s in range(nsteps):
        while nact > 0 and lens[nact - 1] <= s:
            nact -= 1
        src = s % 2
        dst = 1 - src
        for tid in prange(nth):  # each worker owns the same contiguous blocks every step
            first = nblocks * tid // nth
            last = nblocks * (tid + 1) // nth
            for q in range(last - first):
                # zig-zag: odd steps walk the blocks backwards, so the W_hh rows used last (still in
                # this core's L2) are the first ones needed again
                blk = first + q if src == 0 else last - 1 - q
                j0 = blk * _UNITS
                j1 = min(H, j0 + _UNITS)
                for g in range(gates):  # hidden GEMM for this block's rows of every gate
                    dot_rows(w_hh, g * H + j0, g * H + j1, hs, src * B, nact, hh, 0, g * H + j0)
                n = j1 - j0
                for i in range(nact):  # fused gate math on the same units
                    row = order[i]
                    t = lens[i] - 1 - s if reverse else s
                    # views starting at the block's first unit: loops over range(n) vectorise (no
                    # negative-index handling on the indices)
                    xr = t * B + row
                    k1, k2, k3 = H + j0, 2 * H + j0, 3 * H + j0
                    xa, xb, xc = xp[xr, j0:j1], xp[xr, k1 : k1 + n], xp[xr, k2 : k2 + n]
                    ha, hb, hc = hh[i, j0:j1], hh[i, k1 : k1 + n], hh[i, k2 : k2 + n]
                    ba, bb, bc = bx[j0:j1], bx[k1 : k1 + n], bx[k2 : k2 + n]
                    ca, cb, cc = bh[j0:j1], bh[k1 : k1 + n], bh[k2 : k2 + n]
                    h_old, h_new = hs[src * B + i, j0:j1], hs[dst * B + i, j0:j1]
                    o = out[t, row, col + j0 : col + j1]
                    if lstm:
                        xd, hd, bd, cd = xp[xr, k3 : k3 + n], hh[i, k3 : k3 + n], bx[k3 : k3 + n], bh[k3 : k3 + n]
                        c = cs[i, j0:j1]
                        for q in range(n):  # gates i, f, g, o
                            ig = sigmoid(xa[q] + ba[q] + ha[q] + ca[q])
                            fg = sigmoid(xb[q] + bb[q] + hb[q] + cb[q])
                            gg = tanh(xc[q] + bc[q] + hc[q] + cc[q])
                            og = sigmoid(xd[q] + bd[q] + hd[q] + cd[q])
                            cv = fg * c[q] + ig * gg
                            c[q] = cv
                            h_new[q] = og * tanh(cv)
                    else:
                        for q in range(n):  # gates r, z, n
                            r = sigmoid(xa[q] + ba[q] + ha[q] + ca[q])
                            z = sigmoid(xb[q] + bb[q] + hb[q] + cb[q])
                            nv = tanh(xc[q] + bc[q] + r * (hc[q] + cc[q]))
                            h_new[q] = nv + z * (h_old[q] - nv)
                    for q in range(n):
                        o[q] = h_new[q]
    for i in range(B):  # a row's final state sits in the buffer its own last step wrote
        last = 0 if lens[i] == 0 else 1 - (lens[i] - 1) % 2
        h_fin[order[i]] = hs[last * B + i]
        c_fin[order[i]] = cs[i]


def _layer(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col, h_fin, c_fin,
           workers):
    """One layer and direction on ``workers`` threads; see :mod:`._driver` for the arguments."""
    workers = min(workers, numba.config.NUMBA_NUM_THREADS)
    before = numba.get_num_threads()
    if workers != before:
        numba.set_num_threads(workers)  # a 1-thread parallel region wakes no worker thread
    try:
        _layer_jit(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col,
                   h_fin, c_fin, workers)
    finally:
        if workers != before:
            numba.set_num_threads(before)


def gru(x, params, *, h0=None, lengths=None, batch_first=False):
    """See :func:`seqjit.kernels.rnn.reference.gru`."""
    return _driver.run_sequence(spec.prepare_sequence("gru", x, params, h0, lengths, batch_first), _layer)


def lstm(x, params, *, state0=None, lengths=None, batch_first=False):
    """See :func:`seqjit.kernels.rnn.reference.lstm`."""
    return _driver.run_sequence(spec.prepare_sequence("lstm", x, params, state0, lengths, batch_first), _layer)


def gru_cell(x, h, w_ih, w_hh, b_ih=None, b_hh=None, *, out=None):
    """See :func:`seqjit.kernels.rnn.reference.gru_cell`."""
    return _driver.run_cell(spec.prepare_cell("gru", x, h, None, w_ih, w_hh, b_ih, b_hh, out), _layer, False)


def lstm_cell(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    """See :func:`seqjit.kernels.rnn.reference.lstm_cell`."""
    return _driver.run_cell(spec.prepare_cell("lstm", x, h, c, w_ih, w_hh, b_ih, b_hh, None), _layer, True)
