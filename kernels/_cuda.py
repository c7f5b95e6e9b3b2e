"""The numba.cuda convention shared by every family's ``cuda.py``.

- ``numba.cuda`` is imported only here and only when the ``cuda`` backend is asked for.
- CUDA kernels take host ``numpy`` arrays or numba device arrays. When any array argument is a
  device array the result stays on the device (a device array); with host arrays only, the result
  is copied back to the host. A whole encoder pass or decode loop therefore stays on the GPU by
  uploading weights once with :func:`to_device` and passing device arrays from op to op.
- With ``NUMBA_ENABLE_CUDASIM=1`` the kernels run on numba's CUDA simulator (slow; for tests).
"""
from __future__ import annotations

import numpy as np


from seqjit.kernels import KernelUnavailable


class CudaUnavailable(KernelUnavailable):
    """The cuda backend was asked for but no usable GPU (or simulator) is present."""


def require_cuda():
    """Import numba.cuda and check that a GPU or the simulator is usable; return the module."""
    try:
        from numba import cuda
    except Exception as exc:  # pragma: no cover - depends on the install
        raise CudaUnavailable(f"the cuda backend needs numba-cuda (pip install 'seqjit[cuda]'): {exc}") from exc
    try:
        available = cuda.is_available()
    except Exception as exc:  # pragma: no cover - depends on the driver
        raise CudaUnavailable(f"the cuda backend found no usable GPU: {exc}") from exc
    if not available:
        raise CudaUnavailable(
            "the cuda backend found no usable NVIDIA GPU (set NUMBA_ENABLE_CUDASIM=1 to run on the simulator)"
        )
    return cuda


def is_device_array(x) -> bool:
    """A numba device array (real GPU or simulator): anything that is not numpy and copies to host."""
    return not isinstance(x, np.ndarray) and hasattr(x, "copy_to_host") and hasattr(x, "shape")


def any_on_device(*arrays) -> bool:
    return any(a is not None and is_device_array(a) for a in arrays)


def to_device(x):
    """Upload a host array (no-op for a device array)."""
    from numba import cuda

    if x is None or is_device_array(x):
        return x
    return cuda.to_device(np.ascontiguousarray(x))


def to_host(x) -> np.ndarray:
    """Copy a device array back to the host (no-op for a host array)."""
    if isinstance(x, np.ndarray):
        return x
    return x.copy_to_host()


def device_empty(shape, dtype):
    from numba import cuda

    return cuda.device_array(tuple(int(s) for s in shape), dtype=np.dtype(dtype))


def grid_1d(n: int, threads: int = 256) -> tuple[int, int]:
    return (max(1, (n + threads - 1) // threads), threads)


def require_float32(name: str, x) -> None:
    """The cuda kernels compute in float32 only."""
    if np.dtype(x.dtype) != np.float32:
        raise TypeError(f"{name} must have dtype float32 on the cuda backend, got {x.dtype}")


def device_out(name: str, out, shape, dtype):
    """The device buffer a kernel writes: ``out`` itself when it is a device array of the right shape,
    else a fresh device array (a host ``out`` is filled from it by :func:`finish`)."""
    if out is not None:
        if tuple(out.shape) != tuple(shape) or np.dtype(out.dtype) != np.dtype(dtype):
            raise ValueError(
                f"{name} must be a {np.dtype(dtype)} array of shape {list(shape)}, got {out.dtype} {list(out.shape)}"
            )
        if is_device_array(out):
            return out
    return device_empty(shape, dtype)


def finish(dresult, out, on_device: bool):
    """Hand the result back: into a host ``out``, as the device array, or copied to a new host array."""
    if out is not None and isinstance(out, np.ndarray):
        dresult.copy_to_host(out)
        return out
    return dresult if on_device else dresult.copy_to_host()
