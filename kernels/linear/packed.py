"""The "packed" weight layout of the native linear (kernels/linear/native_packed.h), made once per
weight when a plan of more than 2 rows is lowered (seqjit.graph.native_ops).

The N output columns in panels of PANEL columns; each panel is the K x PANEL block W[k, n0:n0+32]
stored k-major and contiguous, zero past N, so a product reads every weight byte once, in order, and
the micro-kernel loads one row of a panel as two (AVX-512) or four (AVX2) vectors. The array starts
on a cache line (every panel row is then a line pair).
"""
from __future__ import annotations

import os
import threading

import numpy as np

from seqjit.kernels._aligned import aligned_empty
from seqjit.kernels.linear_int8 import huge_pages

#: columns per panel (native_packed.h: SJ_PANEL)
PANEL = 32
#: panels packed per NumPy step (bounds the temporary at ~PANEL x CHUNK x K floats)
_CHUNK = 256


#: packed weights of at least this many bytes are carved from arenas backed by 2 MB pages (Linux
#: transparent huge pages, asked for before the first write, so the pages are huge from the start);
#: smaller ones (a 128 x 128 matrix) are left in ordinary memory
ARENA_MIN_BYTES = 64 << 10
#: bytes of one arena (more for a larger weight): the weights of a decode step share few pages
ARENA_BYTES = 32 << 20
_arena_lock = threading.Lock()
_arena: list = [None, 0]  # the current arena (uint8 array, 2 MB aligned) and the offset of its free part


def _huge_pages_wanted() -> bool:
    """False when $SEQJIT_PACK_HUGE_PAGES is "0" (for A/B measurements), else True."""
    return os.environ.get("SEQJIT_PACK_HUGE_PAGES", "1").strip() != "0"


def packed_empty(shape) -> np.ndarray:
    """An uninitialised float32 array for a packed weight, on a cache line; from ARENA_MIN_BYTES, carved
    from an arena of 2 MB pages. Why: a decode step streams ~200 MB of packed weights from memory;
    with 4 KB pages that is a TLB miss every 4 KB and the hardware prefetchers stop at each page's
    end. Measured on the 2-core Xeon of RESULTS.md (benchmarks/gemm, in-process A/B of the same
    kernel, busy host): 16 x 512 x 58101 ~+30% and 16 x 512 x 2048 ~+45% on the mean call. An arena
    lives as long as any array carved from it (numpy's base reference)."""
    nbytes = int(np.prod(shape)) * 4
    if nbytes < ARENA_MIN_BYTES or not _huge_pages_wanted():
        return aligned_empty(shape, np.float32)
    need = -(-nbytes // 64) * 64
    if need > ARENA_BYTES // 4:  # a large weight (the output projection): an arena of its own
        return _new_arena(need)[:nbytes].view(np.float32).reshape(shape)
    with _arena_lock:
        arena, used = _arena
        if arena is None or used + need > arena.nbytes:
            arena, used = _new_arena(ARENA_BYTES), 0
        _arena[:] = [arena, used + need]
    return arena[used : used + nbytes].view(np.float32).reshape(shape)


def _new_arena(nbytes: int) -> np.ndarray:
    """``nbytes`` (rounded up to 2 MB) of uint8 starting on a 2 MB boundary, advised for 2 MB pages."""
    size = -(-nbytes // huge_pages.HUGE) * huge_pages.HUGE
    raw = np.empty(size + huge_pages.HUGE, np.uint8)
    start = -raw.ctypes.data % huge_pages.HUGE
    arena = raw[start : start + size]
    huge_pages.advise(arena, collapse=False)  # not written yet: pages are made huge as they are first written
    return arena


def panels(n: int) -> int:
    """How many panels hold ``n`` columns."""
    return -(-n // PANEL)


def pack_panels(w: np.ndarray, layout: str = "out_in") -> np.ndarray:
    """``w`` (float32, "out_in" [N, K] or "in_out" [K, N]) as panels: shape (panels(N), K, PANEL)."""
    wt = w if layout == "out_in" else w.T  # [N, K], a view
    n, k = wt.shape
    p = panels(n)
    out = packed_empty((p, k, PANEL))
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
