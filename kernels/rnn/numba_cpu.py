"""Numba CPU gru / lstm / gru_cell / lstm_cell.

Per layer and direction one jitted call (:func:`_layer_jit`) does everything: the input projection of
all steps as one parallel GEMM, then the whole time loop. Each step is one parallel loop in which
every worker owns the same contiguous blocks of hidden units for the whole sequence; for each block
it computes that block's rows of the hidden GEMM ``h @ W_hh.T`` for every gate and then applies the
fused gate math to those units straight away. Both GEMMs use the register-blocked 4x4 kernel of
:mod:`._nbgemm` (no BLAS: one thread pool). Odd steps walk a worker's blocks backwards, so the W_hh
rows it used last, still in its L2, come first. Nothing is allocated inside the loop. Rows are
processed sorted by length, so the rows still running at step s are a prefix of the batch.

Large float32 calls (:func:`._driver.use_panels`: batch >= 2 and enough row-steps) take the panel
path instead (:func:`_layer_panels_jit`): compute bound, they pack W_ih and W_hh into 32-unit panels
and run both projections of every step with the outer-product kernel of :mod:`._nbpanel`, which keeps
its accumulators in registers (~55 GMAC/s per Zen 4 core against ~45 for the dot-product kernel).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from . import _driver, spec
from ._nbgemm import FASTMATH as _FM
from ._nbgemm import dot_rows
from ._nbmath import sigmoid, tanh
from ._nbpanel import MR, NR, pack, panel_rows

_UNITS = 64  # hidden units per work block (measured: 64 beats 16 by 8-20% at B=1 and 32)
_TILE_ROWS = 128  # input rows per tile of the input projection


@njit(cache=True)
def _zero_padding(out, lengths, col, H):
    """Padded output steps are zero: ``out[t, b, col:col+H]`` for ``t >= lengths[b]``."""
    for b in range(lengths.shape[0]):
        for t in range(lengths[b], out.shape[0]):
            out[t, b, col : col + H] = 0


@njit(cache=True)
def _sorted_state(h_init, c_init, lengths, order):
    """``(hs, cs, lens)``: the double-buffered state ``hs [2B, H]`` (rows ``0:B`` hold ``h_init``),
    the cell state ``cs [B, H]`` and the lengths, all with rows in ``order`` (longest first)."""
    B, H = h_init.shape
    hs = np.empty((2 * B, H), h_init.dtype)
    cs = np.empty((B, H), h_init.dtype)
    lens = np.empty(B, np.int64)
    for i in range(B):
        lens[i] = lengths[order[i]]
        hs[i] = h_init[order[i]]
        cs[i] = c_init[order[i]]
    return hs, cs, lens


@njit(parallel=True, fastmath=_FM, cache=True)
def _layer_jit(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col, h_fin, c_fin,
               workers):
    """One layer and direction on ``workers`` threads; see :mod:`._driver` for the other arguments."""
    B, H = h_init.shape
    gates = w_hh.shape[0] // H
    _zero_padding(out, lengths, col, H)
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
    hs, cs, lens = _sorted_state(h_init, c_init, lengths, order)  # state rows src*B ..., in `order`
    nblocks = (H + _UNITS - 1) // _UNITS
    nth = max(1, min(workers, nblocks))
    nact = B
    xrow = np.empty(B, np.int64)  # the step's row of xp for each running row
    for s in range(nsteps):
        while nact > 0 and lens[nact - 1] <= s:
            nact -= 1
        src = s % 2
        for i in range(nact):
            xrow[i] = (lens[i] - 1 - s if reverse else s) * B + order[i]
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
                # fused gate math on the same units
                _gate_units(xp, xrow, hh, bx, bh, hs, cs, out, col, order, lens, nact, B, H, s, src, reverse, lstm,
                            j0, j1)
    for i in range(B):  # a row's final state sits in the buffer its own last step wrote
        last = 0 if lens[i] == 0 else 1 - (lens[i] - 1) % 2
        h_fin[order[i]] = hs[last * B + i]
        c_fin[order[i]] = cs[i]


@njit(fastmath=_FM, inline="always")  # inlined into the parallel loop body: vectorised like _layer_jit's
def _gate_units(xs, xrow, hh, bx, bh, hs, cs, out, col, order, lens, nact, B, H, s, src, reverse, lstm, j0, j1):
    """The fused gate math of step ``s`` for units ``j0 <= j < j1`` of the running rows ``i < nact``
    (``xs[xrow[i]]``/``hh[i]``: the step's input/hidden projections of running row i). Views start at
    the first unit, so the loops over ``range(n)`` vectorise (no negative-index handling)."""
    dst = 1 - src
    n = j1 - j0
    for i in range(nact):
        row = order[i]
        t = lens[i] - 1 - s if reverse else s
        xr = xrow[i]
        k1, k2, k3 = H + j0, 2 * H + j0, 3 * H + j0
        xa, xb, xc = xs[xr, j0:j1], xs[xr, k1 : k1 + n], xs[xr, k2 : k2 + n]
        ha, hb, hc = hh[i, j0:j1], hh[i, k1 : k1 + n], hh[i, k2 : k2 + n]
        ba, bb, bc = bx[j0:j1], bx[k1 : k1 + n], bx[k2 : k2 + n]
        ca, cb, cc = bh[j0:j1], bh[k1 : k1 + n], bh[k2 : k2 + n]
        h_old, h_new = hs[src * B + i, j0:j1], hs[dst * B + i, j0:j1]
        o = out[t, row, col + j0 : col + j1]
        if lstm:
            xd, hd, bd, cd = xs[xr, k3 : k3 + n], hh[i, k3 : k3 + n], bx[k3 : k3 + n], bh[k3 : k3 + n]
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


@njit(parallel=True, fastmath=_FM, cache=True)
def _layer_panels_jit(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col, h_fin,
                      c_fin, workers, wp_ih, wp_hh):
    """The large-batch float32 path of :func:`_layer_jit` (``nsteps > 0``). Each worker owns the same
    32-unit panels for the whole call: it packs those panels of W_ih and W_hh (:mod:`._nbpanel`
    layout), then per step computes their columns of the step's input projection ``x_t @ W_ih.T`` and
    hidden projection ``h @ W_hh.T`` with the outer-product panel kernel and applies the fused gate
    math to their units (zig-zag order, as in :func:`_layer_jit`). Computing the input projection per
    step keeps it in L2 instead of a [T*B, G*H] buffer streamed from memory. ``wp_ih``/``wp_hh``:
    flat float32 scratch of ``ceil(H/32)*G*32*K`` and ``...*H`` elements for the packed panels."""
    B, H = h_init.shape
    GH = w_hh.shape[0]
    G = GH // H
    K = x2d.shape[1]
    _zero_padding(out, lengths, col, H)
    npu = (H + NR - 1) // NR
    nth = max(1, min(workers, npu))
    scratch = np.empty((nth * MR, NR), np.float32)  # each worker's partial-panel tile
    rx = np.empty((nth, B), np.int64)  # each worker's row offsets into x2d for the step
    rh = np.empty(B, np.int64)  # row offsets into the state
    rows = np.arange(B)  # xs holds running row i in row i
    xs = np.empty((B, GH), np.float32)  # the step's input projection of the running rows
    hh = np.empty((B, GH), np.float32)  # and hidden projection
    hs, cs, lens = _sorted_state(h_init, c_init, lengths, order)  # state rows src*B ..., in `order`
    for i in range(B):
        rh[i] = i * H
    for tid in prange(nth):
        u0 = npu * tid // nth
        u1 = npu * (tid + 1) // nth
        pack(w_ih, H, G, wp_ih, u0 * G, u1 * G)
        pack(w_hh, H, G, wp_hh, u0 * G, u1 * G)
    nact = B
    for s in range(nsteps):
        while nact > 0 and lens[nact - 1] <= s:
            nact -= 1
        src = s % 2
        for tid in prange(nth):
            u0 = npu * tid // nth
            u1 = npu * (tid + 1) // nth
            rxt = rx[tid]
            for i in range(nact):
                t = lens[i] - 1 - s if reverse else s
                rxt[i] = (t * B + order[i]) * K
            for q in range(u1 - u0):
                u = u0 + q if src == 0 else u1 - 1 - q  # zig-zag, as in _layer_jit
                j0 = u * NR
                j1 = min(H, j0 + NR)
                for g in range(G):
                    p = u * G + g
                    panel_rows(wp_ih, p * K * NR, x2d, rxt, nact, xs, g * H + j0, GH, j1 - j0, scratch, tid * MR * NR)
                    panel_rows(wp_hh, p * H * NR, hs[src * B :], rh, nact, hh, g * H + j0, GH, j1 - j0, scratch,
                               tid * MR * NR)
            # the gate math over all of this worker's units at once: 32-unit loops are too short for
            # LLVM's vector loop (16 lanes x 4 interleaved) and would run its scalar remainder
            if u1 > u0:
                _gate_units(xs, rows, hh, bx, bh, hs, cs, out, col, order, lens, nact, B, H, s, src, reverse, lstm,
                            u0 * NR, min(H, u1 * NR))
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
    panels = _driver.use_panels(h_init.shape[0], nsteps, x2d.dtype)
    try:
        if panels:
            H = h_init.shape[1]
            npan = (H + NR - 1) // NR * (w_hh.shape[0] // H)
            wp_ih = _driver.workspace("wp_ih", npan * NR * x2d.shape[1], np.float32)
            wp_hh = _driver.workspace("wp_hh", npan * NR * H, np.float32)
            _layer_panels_jit(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out,
                              col, h_fin, c_fin, workers, wp_ih, wp_hh)
        else:
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
