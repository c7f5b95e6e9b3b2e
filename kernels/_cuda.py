"""The numba.cuda convention shared by every family's ``cuda.py``.

- ``numba.cuda`` is imported only here and only when the ``cuda`` backend is asked for.
- CUDA kernels take host ``numpy`` arrays or numba device arrays. When any array argument is a
  device array the result stays on the device (a device array); with host arrays only, the result
  is copied back to the host. A whole encoder pass or decode loop therefore stays on the GPU by
  uploading weights once with :func:`to_device` and passing device arrays from op to op.
- With ``NUMBA_ENABLE_CUDASIM=1`` the kernels run on numba's CUDA simulator (slow; for tests).
"""
from __future__ import annotations

import importlib
import math
import os
from contextlib import contextmanager

import numpy as np

from seqjit.errors import CudaUnavailable, DeviceOutOfMemory

__all__ = ["CudaUnavailable", "DeviceOutOfMemory", "require_cuda", "to_device", "to_host", "device_empty"]

_SIMULATOR_HINT = "set NUMBA_ENABLE_CUDASIM=1 before numba.cuda is first imported to run on numba's CUDA simulator"
#: CUresult CUDA_ERROR_OUT_OF_MEMORY
_CUDA_ERROR_OUT_OF_MEMORY = 2


def _simulator_on() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _why_unusable() -> str:
    """What stops numba.cuda from running kernels here (called once ``cuda.is_available()`` is False)."""
    try:
        from numba.cuda.cudadrv import driver

        count = driver.driver.get_device_count()
    except Exception as exc:  # noqa: BLE001 - the driver's own words name what is missing
        text = " ".join(str(exc).split())
        if "driver library cannot be found" in text or "libcuda" in text:
            return f"the NVIDIA driver (libcuda) is not installed or not on the library path ({text})"
        return f"the NVIDIA driver could not be initialised ({text})"
    if count == 0:
        return "the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES and the container's device access)"
    try:
        from numba.cuda.cudadrv import nvvm

        if not nvvm.is_available():
            return "NVVM of the CUDA toolkit (libnvvm) was not found: install the CUDA toolkit or the cuda-nvcc wheel"
    except Exception as exc:  # noqa: BLE001
        return f"NVVM of the CUDA toolkit could not be loaded ({exc})"
    return f"numba.cuda reports the {count} GPU(s) as unusable"


def require_cuda():
    """Import numba.cuda and check that a GPU (or the simulator) can run kernels; return the module.

    Raises :class:`seqjit.errors.CudaUnavailable` naming what is missing: the numba-cuda package, the
    driver, a GPU, or NVVM (each with the simulator as the alternative for tests).
    """
    try:
        cuda = importlib.import_module("numba.cuda")
    except Exception as exc:  # noqa: BLE001 - any import failure means the package is unusable
        raise CudaUnavailable(
            f"the cuda backend needs the numba-cuda package, which is not installed or failed to import "
            f"(pip install 'seqjit[cuda]'): {exc}"
        ) from exc
    try:
        available = cuda.is_available()
    except Exception as exc:  # noqa: BLE001 - depends on the driver
        raise CudaUnavailable(f"the cuda backend found no usable GPU: {exc}; {_SIMULATOR_HINT}") from exc
    if not available:
        if _simulator_on():  # the simulator is always available: it was switched on too late
            raise CudaUnavailable(
                "NUMBA_ENABLE_CUDASIM=1 is set but numba.cuda was imported before it was: the simulator is off "
                f"and {_why_unusable()}"
            )
        raise CudaUnavailable(f"the cuda backend found no usable NVIDIA GPU: {_why_unusable()}; {_SIMULATOR_HINT}")
    return cuda


def _is_out_of_memory(exc: BaseException) -> bool:
    """A device allocation failed for lack of memory: numba's CudaAPIError with CUDA_ERROR_OUT_OF_MEMORY,
    or (on the simulator, whose device arrays are numpy arrays) a MemoryError."""
    if isinstance(exc, MemoryError):
        return True
    if type(exc).__name__ != "CudaAPIError":  # numba's driver error (the simulator has its own class)
        return False
    code = getattr(exc, "code", exc.args[0] if exc.args else None)
    try:
        return code is not None and int(getattr(code, "value", code)) == _CUDA_ERROR_OUT_OF_MEMORY
    except (TypeError, ValueError):
        return False


@contextmanager
def _allocating(what: str, shape, dtype):
    """Turn an out-of-memory failure inside the block into :class:`DeviceOutOfMemory` naming the array."""
    try:
        yield
    except Exception as exc:
        if not _is_out_of_memory(exc):
            raise
        dtype = np.dtype(dtype)
        nbytes = math.prod(int(s) for s in shape) * dtype.itemsize
        raise DeviceOutOfMemory(
            f"out of GPU memory allocating {what}: a {dtype} array of shape {list(shape)} ({_size(nbytes)}); "
            "free device arrays that are no longer needed, or run a smaller batch or beam"
        ) from exc


def _size(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        nbytes /= 1024
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.1f} {unit}"


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
    x = np.ascontiguousarray(x)
    with _allocating("an uploaded array", x.shape, x.dtype):
        return cuda.to_device(x)


def to_host(x) -> np.ndarray:
    """Copy a device array back to the host (no-op for a host array)."""
    if isinstance(x, np.ndarray):
        return x
    return x.copy_to_host()


def device_empty(shape, dtype):
    from numba import cuda

    shape = tuple(int(s) for s in shape)
    with _allocating("a device buffer", shape, dtype):
        return cuda.device_array(shape, dtype=np.dtype(dtype))


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
