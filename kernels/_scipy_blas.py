"""scipy's BLAS is optional (the ``blas`` extra): the one place that says so for the Numba kernels.

Numba's ``np.dot`` and the Numba linear kernel's direct BLAS calls both go through
``scipy.linalg.cython_blas``; without scipy, those two Numba modules refuse to import with an
ImportError naming the extra (the registry reports it as ``KernelUnavailable`` and picks the next
backend: the Cython kernels, which fall back to portable loops, see ``_blas_ptrs.pxi``).
"""
from __future__ import annotations

import importlib.util

#: how to install what is missing
INSTALL_HINT = "pip install 'seqjit[blas]'"


def available() -> bool:
    """True when scipy (and with it ``scipy.linalg.cython_blas``) can be imported."""
    try:
        return importlib.util.find_spec("scipy") is not None
    except (ImportError, ValueError):  # a broken or blocked scipy entry in sys.modules
        return False


def require(what: str) -> None:
    """Raise ImportError naming ``what`` and the extra unless scipy's BLAS is installed."""
    if not available():
        raise ImportError(f"{what} calls scipy's BLAS, which is not installed: {INSTALL_HINT}")
