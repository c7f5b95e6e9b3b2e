"""Arrays that start on a cache-line boundary.

numpy's large arrays start 16 bytes into a cache line, so every 64-byte vector load or store of
them splits two lines. The rnn panel path's buffers (packed weights, projections, state) and the
graph executor's memory slabs are allocated here instead (on Zen 4 the rnn difference was within
noise; CPUs with costlier split loads gain more).
"""
from __future__ import annotations

import numpy as np

#: bytes of alignment: a cache line
ALIGN = 64


def aligned_empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` starting on an ALIGN-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def aligned(a: np.ndarray) -> np.ndarray:
    """``a`` (C-contiguous) when it starts on an ALIGN-byte boundary, else an aligned copy. Weights
    go through it: a decode step streams them with 64-byte loads, and a load split over two cache
    lines costs a second one (the figure: benchmarks/RESULTS.md, "Figures moved out of docstrings
    (issue 40)")."""
    if a.ctypes.data % ALIGN == 0 or a.nbytes == 0:
        return a
    out = aligned_empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out
