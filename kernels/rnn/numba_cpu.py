"""Numba CPU gru / lstm / gru_cell / lstm_cell.

Per layer and direction one jitted call (:func:`_layer`) does everything: the input projection of all
steps as one BLAS GEMM, then the whole time loop. Each step is one parallel loop over blocks of
hidden units; a block computes its rows of the hidden GEMM ``h @ W_hh.T`` for every gate with a
register-blocked 4x4 dot-product kernel (4 weight rows x 4 batch rows, the weight rows read once per
4 rows of h) and then applies the fused gate math to those units straight away. The rows of W_hh a
thread owns are the same every step (static schedule), and nothing is allocated inside the loop.
Rows are processed sorted by length, so the rows still running at step s are a prefix of the batch.
"""
from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange

from . import _driver, spec
from ._nbmath import sigmoid, tanh

_FM = {"reassoc", "contract", "nsz"}  # reassociation lets LLVM vectorise the dot products
_UNITS = 16  # hidden units per parallel work item


@njit(fastmath=_FM, cache=True)
def _rows4(w, r, hs, src, nact, hh, c):
    """``hh[i, c + q] = w[r + q] . hs[src, i]`` for q < 4 and every running row i < nact."""
    K = w.shape[1]
    zero = hh.dtype.type(0)
    i = 0
    while i + 4 <= nact:
        a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = zero
        a20 = a21 = a22 = a23 = a30 = a31 = a32 = a33 = zero
        for k in range(K):
            w0, w1, w2, w3 = w[r, k], w[r + 1, k], w[r + 2, k], w[r + 3, k]
            x0, x1, x2, x3 = hs[src, i, k], hs[src, i + 1, k], hs[src, i + 2, k], hs[src, i + 3, k]
            a00 += w0 * x0
            a01 += w0 * x1
            a02 += w0 * x2
            a03 += w0 * x3
            a10 += w1 * x0
            a11 += w1 * x1
            a12 += w1 * x2
            a13 += w1 * x3
            a20 += w2 * x0
            a21 += w2 * x1
            a22 += w2 * x2
            a23 += w2 * x3
            a30 += w3 * x0
            a31 += w3 * x1
            a32 += w3 * x2
            a33 += w3 * x3
        hh[i, c], hh[i, c + 1], hh[i, c + 2], hh[i, c + 3] = a00, a10, a20, a30
        hh[i + 1, c], hh[i + 1, c + 1], hh[i + 1, c + 2], hh[i + 1, c + 3] = a01, a11, a21, a31
        hh[i + 2, c], hh[i + 2, c + 1], hh[i + 2, c + 2], hh[i + 2, c + 3] = a02, a12, a22, a32
        hh[i + 3, c], hh[i + 3, c + 1], hh[i + 3, c + 2], hh[i + 3, c + 3] = a03, a13, a23, a33
        i += 4
    while i < nact:
        a0 = a1 = a2 = a3 = zero
        for k in range(K):
            x = hs[src, i, k]
            a0 += w[r, k] * x
            a1 += w[r + 1, k] * x
            a2 += w[r + 2, k] * x
            a3 += w[r + 3, k] * x
        hh[i, c], hh[i, c + 1], hh[i, c + 2], hh[i, c + 3] = a0, a1, a2, a3
        i += 1


@njit(fastmath=_FM, cache=True)
def _row1(w, r, hs, src, nact, hh, c):
    """``hh[i, c] = w[r] . hs[src, i]`` for every running row i < nact."""
    for i in range(nact):
        a = hh.dtype.type(0)
        for k in range(w.shape[1]):
            a += w[r, k] * hs[src, i, k]
        hh[i, c] = a


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
    xp = np.dot(x2d, w_ih.T)  # [T*B, G*H]: every step's input projection in one GEMM
    hh = np.empty((B, w_hh.shape[0]), h_init.dtype)
    hs = np.empty((2, B, H), h_init.dtype)  # double-buffered state, rows in `order`
    cs = np.empty((B, H), h_init.dtype)
    lens = np.empty(B, np.int64)
    for i in range(B):
        lens[i] = lengths[order[i]]
        hs[0, i] = h_init[order[i]]
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
                    j = j0
                    while j + 4 <= j1:
                        _rows4(w_hh, g * H + j, hs, src, nact, hh, g * H + j)
                        j += 4
                    while j < j1:
                        _row1(w_hh, g * H + j, hs, src, nact, hh, g * H + j)
                        j += 1
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
                    h_old, h_new, o = hs[src, i, j0:j1], hs[dst, i, j0:j1], out[t, row, col + j0 : col + j1]
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
        h_fin[order[i]] = hs[last, i]
        c_fin[order[i]] = cs[i]


def _layer(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col, h_fin, c_fin):
    """One layer and direction; see :mod:`._driver` for the arguments."""
    _layer_jit(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse, lstm, out, col, h_fin, c_fin,
               get_num_threads())


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
