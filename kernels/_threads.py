"""One thread setting for every backend: Numba, the Cython kernels' OpenMP loops, and BLAS."""
from __future__ import annotations

import numbers
import os
import threading
from contextlib import contextmanager

_num_threads: int | None = None
_local = threading.local()  # a per-thread cap (see :func:`thread_cap`)
#: the most threads :func:`set_num_threads` takes: far past any machine's cores, and within what
#: BLAS and OpenMP take as a C int (2**40 left them broken for every later call)
MAX_THREADS = 4096


def default_num_threads() -> int:
    """The cores this process may use (respects CPU affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def get_num_threads() -> int:
    count = _num_threads if _num_threads is not None else default_num_threads()
    cap = getattr(_local, "cap", None)
    return count if cap is None else min(count, cap)


@contextmanager
def thread_cap(n: int):
    """In this thread only, use at most ``n`` intra-op threads (the native replay and the kernels
    read :func:`get_num_threads`): for work that is already split over threads."""
    before = getattr(_local, "cap", None)
    _local.cap = n
    try:
        yield
    finally:
        _local.cap = before


def set_num_threads(n: int | None) -> int:
    """Use ``n`` threads in Numba, OpenMP (Cython kernels) and BLAS; ``None`` restores the default.

    Returns the number now in force.
    """
    global _num_threads
    if n is not None:
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"num_threads must be a positive integer (or None for the default), got {n!r}")
        if n > MAX_THREADS:
            raise ValueError(f"num_threads must be at most {MAX_THREADS} (this machine has {default_num_threads()} "
                             f"usable cores), got {n}")
        n = int(n)
    _num_threads = n
    count = get_num_threads()
    import numba

    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (load scipy's BLAS now, so the limit reaches it)
    except ImportError:  # the optional ``blas`` extra: numpy's BLAS and OpenMP are still limited below
        pass
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a run-time dependency
        return count
    threadpool_limits(limits=count, user_api="blas")
    threadpool_limits(limits=count, user_api="openmp")
    return count
