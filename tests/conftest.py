"""Shared test settings.

CUDA kernels run on numba's CUDA simulator unless a real NVIDIA GPU is present: the variable must be
set before numba.cuda is first imported, which is why it is set here.
"""
import os

if "NUMBA_ENABLE_CUDASIM" not in os.environ and not os.path.exists("/dev/nvidia0"):
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import numpy as np
import pytest

#: tolerances for a compiled backend against the NumPy reference, per dtype
TOL = {
    np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
    np.dtype(np.float64): dict(rtol=1e-11, atol=1e-12),
}


@pytest.fixture
def tol():
    """``tol(dtype)`` -> keyword arguments for ``np.testing.assert_allclose``."""
    return lambda dtype: TOL[np.dtype(dtype)]


def _cuda_usable() -> str | None:
    """None when the cuda backend can run (GPU or simulator), else the reason it cannot."""
    try:
        from seqjit.kernels._cuda import require_cuda

        require_cuda()
    except Exception as exc:  # noqa: BLE001 - report any reason
        return str(exc)
    return None


@pytest.fixture(params=["numba", "cython", "cuda"])
def backend(request):
    """Every compiled backend; cuda is skipped only when neither a GPU nor the simulator is usable."""
    if request.param == "cuda":
        reason = _cuda_usable()
        if reason:
            pytest.skip(f"no GPU and no CUDA simulator: {reason}")
    return request.param


@pytest.fixture
def on_simulator():
    """True when cuda kernels run on the (slow) simulator: tests then use small shapes."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
