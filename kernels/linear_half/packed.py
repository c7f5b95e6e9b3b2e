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


def pack_bf16_pairs(w: np.ndarray) -> np.ndarray:
    """bfloat16 bits ``w`` [N, K] as the pair panels of the bf16 arithmetic (native_bf16dot.h): uint32
    (panels(N), ceil(K / 2), PANEL), lane j of pair row i holding ``W[n0 + j, 2i] | W[n0 + j, 2i + 1] << 16``,
    zero past N and past K (an odd K's last pair); bf16 subnormals zeroed (their sign kept), as
    vdpbf16ps reads them. On a cache line, as the panels above."""
    if w.dtype != np.uint16 or w.ndim != 2:
        raise TypeError(f"pack_bf16_pairs takes uint16 [N, K] bits, got {w.dtype} {list(w.shape)}")
    n, k = w.shape
    k2, p = (k + 1) // 2, panels(n)
    out = aligned_empty((p, k2, PANEL), np.uint32)
    huge_pages.advise(out, collapse=False)
    for p0 in range(0, p, _CHUNK):
        p1 = min(p, p0 + _CHUNK)
        rows = np.zeros(((p1 - p0) * PANEL, 2 * k2), np.uint32)
        part = w[p0 * PANEL:p1 * PANEL]
        rows[:part.shape[0], :k] = np.where((part & 0x7F80) == 0, part & 0x8000, part)
        pairs = rows[:, 0::2] | (rows[:, 1::2] << 16)  # [cols, k2]
        out[p0:p1] = pairs.reshape(p1 - p0, PANEL, k2).transpose(0, 2, 1)
    return out


def unpack_bf16_pairs(packed: np.ndarray, n: int, k: int) -> np.ndarray:
    """The [N, K] bits back from their pair panels (subnormals zeroed; for tests)."""
    p, k2, _ = packed.shape
    cols = packed.transpose(0, 2, 1).reshape(p * PANEL, k2)[:n]
    out = np.empty((n, 2 * k2), np.uint16)
    out[:, 0::2], out[:, 1::2] = cols & 0xFFFF, cols >> 16
    return np.ascontiguousarray(out[:, :k])
