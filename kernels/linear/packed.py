"""The "packed" weight layout of the native linear (kernels/linear/native_packed.h), made once per
weight when a plan of more than 2 rows is lowered (seqjit.graph.native_ops).

The N output columns in panels of PANEL columns; each panel is the K x PANEL block W[k, n0:n0+32]
stored k-major and contiguous, zero past N, so a product reads every weight byte once, in order, and
the micro-kernel loads one row of a panel as two (AVX-512) or four (AVX2) vectors. The array starts
on a cache line (every panel row is then a line pair).
"""
from __future__ import annotations

import numpy as np

from seqjit.kernels._aligned import aligned_empty

#: columns per panel (native_packed.h: SJ_PANEL)
PANEL = 32
#: panels packed per NumPy step (bounds the temporary at ~PANEL x CHUNK x K floats)
_CHUNK = 256


def panels(n: int) -> int:
    """How many panels hold ``n`` columns."""
    return -(-n // PANEL)


def pack_panels(w: np.ndarray, layout: str = "out_in") -> np.ndarray:
    """``w`` (float32, "out_in" [N, K] or "in_out" [K, N]) as panels: shape (panels(N), K, PANEL)."""
    wt = w if layout == "out_in" else w.T  # [N, K], a view
    n, k = wt.shape
    p = panels(n)
    out = aligned_empty((p, k, PANEL), np.float32)
    full = n // PANEL
    for p0 in range(0, full, _CHUNK):
        p1 = min(full, p0 + _CHUNK)
        out[p0:p1] = wt[p0 * PANEL : p1 * PANEL].reshape(p1 - p0, PANEL, k).transpose(0, 2, 1)
    if full < p:
        out[full] = 0.0
        out[full, :, : n - full * PANEL] = wt[full * PANEL :].T
    return out


def unpack_panels(packed: np.ndarray, n: int) -> np.ndarray:
    """The "out_in" [N, K] weight back from its panels (for tests)."""
    p, k, _ = packed.shape
    return np.ascontiguousarray(packed.transpose(0, 2, 1).reshape(p * PANEL, k)[:n])
