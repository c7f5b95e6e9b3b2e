"""The CPU backends' shared plumbing: layers and directions in Python, each one a single kernel call.

A backend supplies ``layer(x2d, w_ih, w_hh, bx, bh, h_init, c_init, lengths, order, nsteps, reverse,
lstm, out, col, h_fin, c_fin, workers)``, which runs one layer and direction entirely in compiled code
on ``workers`` threads:

- ``x2d`` ``[T*B, I]`` time-major input rows; ``w_ih`` ``[G*H, I]``, ``w_hh`` ``[G*H, H]``;
- ``bx``/``bh`` ``[G*H]``: the biases added to the input and to the hidden projection;
- ``h_init``/``c_init``/``h_fin``/``c_fin`` ``[B, H]`` (``c_*`` unused by the GRU);
- ``lengths`` int64 ``[B]``, ``order`` int64 ``[B]`` (rows by length, longest first), ``nsteps`` =
  max length; ``reverse`` runs each row from its own last step back to 0;
- ``out`` ``[T, B, W]``: the kernel writes columns ``col:col+H`` (zeros where ``t >= lengths[b]``).
"""
from __future__ import annotations

import threading

import numpy as np

from seqjit.kernels._aligned import aligned_empty
from seqjit.kernels._threads import get_num_threads

from . import spec

#: below this many multiply-adds a layer or cell runs on one thread: waking a second thread costs
#: more than it saves on small work (and on a busy machine it can cost a scheduler time slice)
PARALLEL_MIN_MACS = 1 << 22


#: float32 layer calls of at least PANEL_MIN_ROWS batch rows and PANEL_MIN_ROW_STEPS rows x steps take
#: the panel path: both weight matrices packed into 32-unit panels (about two passes over them), then an
#: outer-product GEMM kernel per step. Batch 1 is memory bound (each weight is used once per step) and
#: keeps the dot-product kernel, whose zig-zag order reuses W_hh from L2 and which packs nothing; short
#: calls (cells, a few steps) keep it too, since packing costs about as much as one pass of the GEMM:
#: the thresholds are where the gain per row-step pays for the packing (the measurements:
#: benchmarks/RESULTS.md, "Figures moved out of docstrings (issue 40)").
PANEL_MIN_ROWS = 2
PANEL_MIN_ROW_STEPS = 256


def use_panels(batch: int, nsteps: int, dtype) -> bool:
    """Whether a layer call of ``batch`` rows and ``nsteps`` steps in ``dtype`` takes the panel path."""
    return (batch >= PANEL_MIN_ROWS and batch * nsteps >= PANEL_MIN_ROW_STEPS and nsteps > 0
            and np.dtype(dtype) == np.float32)


_workspace = threading.local()

def workspace(name: str, size: int, dtype) -> np.ndarray:
    """A flat ``[size]`` scratch array (cache-line aligned) kept per Python thread and reused across calls
    (grown when too small): the panel path's packed weights (~8 MB at H = 512) would otherwise be
    fresh pages, zeroed by the kernel on first touch, in every call. Contents are undefined; do not
    return it to callers."""
    cache = _workspace.__dict__
    dtype = np.dtype(dtype)
    buf = cache.get(name)
    if buf is None or buf.dtype != dtype or buf.size < size:
        buf = cache[name] = aligned_empty(max(size, 1), dtype)
    return buf[:size]


def workers(macs: int) -> int:
    """Threads for a kernel call of ``macs`` multiply-adds."""
    return get_num_threads() if macs >= PARALLEL_MIN_MACS else 1


def run_sequence(seq: spec.Sequence, layer):
    """Run a checked gru/lstm call with a backend's ``layer`` kernel; returns the op's result."""
    T, B, _ = seq.shape
    H, D = seq.hidden, seq.num_directions
    dtype = seq.x.dtype
    lstm = seq.mode == "lstm"
    order = seq.order()
    nsteps = int(seq.lengths.max()) if B else 0
    zeros = np.zeros((B, H), dtype)
    layer_in = seq.x
    for k, directions in enumerate(seq.layers):
        layer_out = seq.output if k == seq.num_layers - 1 else np.empty((T, B, D * H), dtype)
        for d, w in enumerate(directions):
            idx = k * D + d
            h_init = zeros if seq.h0 is None else seq.h0[idx]
            c_init = zeros if seq.c0 is None else seq.c0[idx]
            c_fin = seq.c_n[idx] if lstm else np.empty((B, H), dtype)
            bx, bh = spec.gate_biases(w.w_hh, w.b_ih, w.b_hh, dtype)
            x2d = layer_in.reshape(T * B, layer_in.shape[2])
            macs = T * B * w.w_hh.shape[0] * (x2d.shape[1] + H)
            layer(x2d, w.w_ih, w.w_hh, bx, bh, h_init, c_init, seq.lengths, order, nsteps, d == 1, lstm,
                  layer_out, d * H, seq.h_n[idx], c_fin, workers(macs))
        layer_in = layer_out
    return seq.result()


def run_cell(cell: spec.Cell, layer, lstm: bool):
    """One step of a checked gru_cell/lstm_cell call through the same ``layer`` kernel (T = 1)."""
    B, H = cell.h_out.shape
    dtype = cell.x.dtype
    zeros = np.zeros((B, H), dtype)
    h = zeros if cell.h is None else cell.h
    c = zeros if cell.c is None else cell.c
    c_fin = cell.c_out if lstm else np.empty((B, H), dtype)
    bx, bh = spec.gate_biases(cell.w_hh, cell.b_ih, cell.b_hh, dtype)
    ones = np.ones(B, np.int64)
    order = np.arange(B, dtype=np.int64)
    macs = B * cell.w_hh.shape[0] * (cell.x.shape[1] + H)
    layer(cell.x, cell.w_ih, cell.w_hh, bx, bh, h, c, ones, order, 1 if B else 0, False, lstm,
          cell.h_out.reshape(1, B, H), 0, cell.h_out, c_fin, workers(macs))
    return cell.h_out if not lstm else (cell.h_out, cell.c_out)
