"""Back a large weight array with 2 MB pages (Linux transparent huge pages), in place.

A batch-1 decode step streams every weight from memory; with 4 KB pages that is a TLB miss (a page
walk) every 4 KB, ~12,500 per step of an opus-mt-en-de-sized int8 model. With every weight in 2 MB
pages the step's products run faster (benchmarks/int8/decode_step.c; figures in
benchmarks/RESULTS.md); the native replay advises each int8 weight it lowers (``linear_int8``'s
lowering in seqjit.graph.ops.kernel_ops), which reaches the 30 MB output projection.
:func:`advise` asks the kernel to back
the 2 MB-aligned part of an array's memory with huge pages: ``madvise(MADV_HUGEPAGE)``, then
``madvise(MADV_COLLAPSE)`` (Linux 6.1+) to do it now rather than whenever khugepaged gets there.
Only whole 2 MB pages inside the array are advised, so no other memory is touched; arrays smaller
than 4 MB may hold none. The contents and addresses do not change: this is only a hint, and every
failure (another OS, an older kernel, THP disabled) is ignored.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

import numpy as np

HUGE = 2 << 20
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
#: arrays below this many bytes are left alone (they hold at most one whole 2 MB page)
MIN_BYTES = 2 * HUGE

_libc = None
_done: set = set()


def _madvise():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fn = lib.madvise
            fn.argtypes, fn.restype = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
            _libc = fn
        except (OSError, AttributeError):
            _libc = False
    return _libc


def advise(array: np.ndarray, collapse: bool = True) -> int:
    """Ask for 2 MB pages under the whole 2 MB pages inside ``array``'s buffer (Linux; once per
    buffer address). Returns the bytes advised (0 when nothing was: small array, not Linux, ...).
    ``collapse=False`` for memory not written yet: its first writes then fault in 2 MB pages, and
    the parts never written stay unallocated (MADV_COLLAPSE would allocate all of it now)."""
    if not sys.platform.startswith("linux") or array.nbytes < MIN_BYTES or not array.flags.c_contiguous:
        return 0
    start = array.ctypes.data
    lo, hi = -(-start // HUGE) * HUGE, (start + array.nbytes) // HUGE * HUGE
    if hi <= lo or (lo, hi) in _done:
        return 0
    madvise = _madvise()
    if not madvise:
        return 0
    _done.add((lo, hi))
    if madvise(lo, hi - lo, MADV_HUGEPAGE) != 0:
        return 0
    if collapse:
        madvise(lo, hi - lo, MADV_COLLAPSE)  # may fail (kernel < 6.1): khugepaged collapses later
    return hi - lo
