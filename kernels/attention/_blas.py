"""How the CPU attention kernels use BLAS: tile sizes, and one BLAS thread inside parallel loops.

- :func:`tile_sizes`: queries x keys per tile. Measured on 2 cores (benchmarks/results/attention.md):
  OpenBLAS runs GEMMs up to M*N*K = 1e6 on unpacked small-matrix kernels, ~40 % faster than its
  packed path at these sizes, so a tile is sized to ``BLOCK_Q * block_k * max(D, Dv) <= GEMM_BUDGET``
  (64 queries x 128 keys at D = 64). With fewer queries (decode) the key block grows accordingly.
- :func:`single_threaded_blas`: the Numba and Cython kernels run their tile GEMMs from inside their
  own parallel loops; a multi-threaded BLAS there would oversubscribe the cores. This context manager
  limits every loaded BLAS (numpy's and scipy's OpenBLAS, which Numba's ``np.dot`` and
  ``scipy.linalg.cython_blas`` call) to one thread and restores the settings on exit.
"""
from __future__ import annotations

import contextlib

try:
    import scipy.linalg.cython_blas  # noqa: F401  (load scipy's BLAS before threadpoolctl looks)
except ImportError:  # the optional ``blas`` extra: the Cython kernels then run portable loops
    pass

#: queries per tile
BLOCK_Q = 64
#: multiply-adds per tile GEMM: 64 x 128 x 64
GEMM_BUDGET = 64 * 128 * 64
#: key-block bounds
MIN_BLOCK_K, MAX_BLOCK_K = 16, 8192

_controller = None


def tile_sizes(Lq: int, Lk: int, D: int, Dv: int) -> tuple[int, int]:
    """``(block_q, block_k)`` for these sizes (each at least 1)."""
    bq = max(1, min(BLOCK_Q, Lq))
    bk = GEMM_BUDGET // (bq * max(D, Dv, 1))
    return bq, max(1, min(Lk, MAX_BLOCK_K, max(MIN_BLOCK_K, bk)))


def single_threaded_blas():
    global _controller
    try:
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        return _controller.limit(limits=1, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl is a run-time dependency
        return contextlib.nullcontext()
