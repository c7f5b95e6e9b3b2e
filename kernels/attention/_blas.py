"""Keep BLAS single-threaded while a parallel kernel calls it from every worker thread.

The Numba and Cython attention kernels run GEMMs on small tiles from inside their own parallel loops
(``prange``); a multi-threaded BLAS there would oversubscribe the cores. ``single_threaded_blas()``
is a context manager limiting every loaded BLAS (numpy's and scipy's OpenBLAS, which Numba's
``np.dot`` and ``scipy.linalg.cython_blas`` call) to one thread, restoring the settings on exit.
"""
from __future__ import annotations

import contextlib

import scipy.linalg.cython_blas  # noqa: F401  (load scipy's BLAS before threadpoolctl looks)

_controller = None


def single_threaded_blas():
    global _controller
    try:
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        return _controller.limit(limits=1, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl is a run-time dependency
        return contextlib.nullcontext()
