"""The packed layout of 16-bit weights for the native linear_half (native_half.h): the float32 packed
layout (kernels/linear/packed.py) with uint16 values. The N output columns in panels of PANEL (32)
columns; each panel the K x 32 block ``W[n0:n0+32, :]^T``, k-major and contiguous, zero past N; the
array starts on a cache line. Made once per weight when a plan is lowered (the graph's plans share
it). Zero bits are +0.0 in both formats."""
from __future__ import annotations

import numpy as np

from seqjit.kernels._aligned import aligned_empty
from seqjit.kernels.linear.packed import PANEL, panels
from seqjit.kernels.linear_int8 import huge_pages

#: panels packed per NumPy step (bounds the temporary)
_CHUNK = 256


def pack_half_panels(w: np.ndarray) -> np.ndarray:
    """uint16 ``w`` [N, K] as panels: uint16 (panels(N), K, PANEL)."""
    if w.dtype != np.uint16 or w.ndim != 2:
        raise TypeError(f"pack_half_panels takes uint16 [N, K] bits, got {w.dtype} {list(w.shape)}")
    n, k = w.shape
    p = panels(n)
    out = aligned_empty((p, k, PANEL), np.uint16)
    huge_pages.advise(out, collapse=False)  # streamed from memory every step: 2 MB pages if large
    full = n // PANEL
    for p0 in range(0, full, _CHUNK):
        p1 = min(full, p0 + _CHUNK)
        out[p0:p1] = w[p0 * PANEL:p1 * PANEL].reshape(p1 - p0, PANEL, k).transpose(0, 2, 1)
    if full < p:
        out[full] = 0
        out[full, :, :n - full * PANEL] = w[full * PANEL:].T
    return out


def unpack_half_panels(packed: np.ndarray, n: int) -> np.ndarray:
    """The [N, K] bits back from their panels (for tests)."""
    p, k, _ = packed.shape
    return np.ascontiguousarray(packed.transpose(0, 2, 1).reshape(p * PANEL, k)[:n])
