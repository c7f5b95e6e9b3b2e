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
import threading
from contextlib import contextmanager

import numpy as np

from seqjit.errors import CudaUnavailable, DeviceOutOfMemory

__all__ = ["CudaUnavailable", "DeviceOutOfMemory", "require_cuda", "to_device", "to_host", "device_empty",
           "strided", "reshape_view", "permute_view", "broadcast_view", "is_c_contiguous",
           "threads_for", "row_threads", "host_mirror", "to_device_mirrored"]

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

    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    with _allocating("a device buffer", shape, dtype):
        return cuda.device_array(shape, dtype=np.dtype(dtype))


_scratch = threading.local()
_SCRATCH_ENTRIES = 64  # buffers a thread keeps (least recently used dropped first)


def scratch(tag: str, shape, dtype):
    """A device buffer for a kernel's internal use (statistics, partial sums, projections), reused by the
    next call of the same thread with the same ``tag``, shape and dtype: a decode step allocates (and
    frees: numba's deferred frees synchronize the device) nothing. Per thread, so two threads never
    share one; within a thread every launch goes to the same stream in order, so a call's use of a
    buffer ends before the next call's kernels write it. Never return a scratch buffer to a caller."""
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    key = (tag, shape, np.dtype(dtype).str)
    cache = getattr(_scratch, "buffers", None)
    if cache is None:
        cache = _scratch.buffers = {}
    buf = cache.pop(key, None)
    if buf is None:
        buf = device_empty(shape, dtype)
        while len(cache) >= _SCRATCH_ENTRIES:
            cache.pop(next(iter(cache)))
    cache[key] = buf  # (re)inserted last: the most recently used
    return buf


def grid_1d(n: int, threads: int = 256) -> tuple[int, int]:
    """``(blocks, threads)`` for one thread per item of ``n``: blocks of ``threads``, fewer (a power of
    two covering ``n``) when ``n`` is smaller."""
    threads = threads_for(n, threads)
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


def threads_for(n: int, cap: int) -> int:
    """Threads for a block working on ``n`` items: the power of two >= ``n``, at most ``cap`` (a power of
    two), at least 1. Blocks sized by the work leave no thread idle at small sizes (a tiny vocabulary,
    a short KV cache) and cost the simulator, which runs every thread as a Python thread, far less."""
    n = max(1, int(n))
    return min(int(cap), 1 << (n - 1).bit_length())


#: elements of a row each thread of a row kernel (softmax, layer_norm, argmax...) takes at least
ROW_ITEMS = 8


def row_threads(n: int, cap: int) -> int:
    """Threads of a block reducing a row of ``n`` elements: ``threads_for(n / ROW_ITEMS, cap)``."""
    return threads_for(-(-int(n) // ROW_ITEMS), cap)


def _is_simulated(x) -> bool:
    return hasattr(x, "_ary")  # the simulator's FakeCUDAArray wraps a numpy array


def strided(x, shape, strides):
    """A device array over ``x``'s memory (starting at its first element) with ``shape`` and byte
    ``strides``: a view, no copy (the caller keeps it inside ``x``'s memory)."""
    shape = tuple(int(s) for s in shape)
    strides = tuple(int(s) for s in strides)
    if _is_simulated(x):
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(np.lib.stride_tricks.as_strided(x._ary, shape, strides), stream=x.stream)
    return type(x)(shape, strides, x.dtype, stream=x.stream, gpu_data=x.gpu_data)


def _view_strides(shape, strides, itemsize, new_shape):
    """The strides numpy gives a view of an array of ``shape``/``strides`` reshaped to ``new_shape``,
    or None when that reshape needs a copy (computed on a stand-in: no memory is read)."""
    stand_in = np.lib.stride_tricks.as_strided(np.empty(1, np.dtype(f"V{itemsize}")), shape, strides)
    view = stand_in.view()
    try:
        view.shape = new_shape  # numpy refuses (AttributeError) where the reshape would copy
    except (AttributeError, ValueError):
        return None
    return view.strides


def reshape_view(x, shape):
    """``x`` reshaped without a copy (also a strided ``x``, where numpy could view it); ValueError when the
    layout does not allow a view. (numba's ``reshape`` refuses strided arrays, and the simulator's copies
    them silently, which would lose writes.)"""
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) != math.prod(tuple(x.shape)):
        raise ValueError(f"cannot reshape a device array of shape {list(x.shape)} to {list(shape)}")
    if tuple(x.shape) == shape:
        return x
    strides = _view_strides(tuple(x.shape), tuple(x.strides), np.dtype(x.dtype).itemsize, shape)
    if strides is None:
        raise ValueError(f"a device array of shape {list(x.shape)} and strides {list(x.strides)} cannot be "
                         f"viewed as {list(shape)} without a copy")
    return strided(x, shape, strides)


def permute_view(x, axes):
    """``x`` with its axes permuted (numpy's ``transpose(axes)``), a strided view. (numba's device
    ``transpose`` copies, and only 2-D arrays.)"""
    axes = tuple(int(a) for a in axes)
    if sorted(axes) != list(range(len(x.shape))):
        raise ValueError(f"axes {list(axes)} is not a permutation of the {len(x.shape)} axes of a device array")
    return strided(x, [x.shape[a] for a in axes], [x.strides[a] for a in axes])


def host_mirror(x):
    """The host copy a device array was uploaded from, when it keeps one (see :func:`to_device_mirrored`):
    its values can then be checked on the host without a transfer. None otherwise."""
    return getattr(x, "_seqjit_host", None) if is_device_array(x) else None


def to_device_mirrored(x):
    """Upload ``x`` and keep a read-only host copy on the device array (:func:`host_mirror`): for ids and
    lengths, which kernels check on the host (range, running rows) and read on the device."""
    host = np.array(x, copy=True)
    host.flags.writeable = False
    d = to_device(host)
    d._seqjit_host = host
    return d


def broadcast_view(x, shape):
    """``x`` broadcast to ``shape`` (numpy's rules; zero strides on the broadcast axes), a view."""
    shape = tuple(int(s) for s in shape)
    xs, st = tuple(x.shape), tuple(x.strides)
    if len(xs) > len(shape):
        raise ValueError(f"cannot broadcast shape {list(xs)} to {list(shape)}")
    pad = len(shape) - len(xs)
    xs, st = (1,) * pad + xs, (0,) * pad + st
    strides = []
    for have, want, s in zip(xs, shape, st):
        if have == want:
            strides.append(s if want > 1 else 0)
        elif have == 1:
            strides.append(0)
        else:
            raise ValueError(f"cannot broadcast shape {list(x.shape)} to {list(shape)}")
    return strided(x, shape, strides)


def is_c_contiguous(x) -> bool:
    """Whether ``x`` (host or device) is C-contiguous (size-1 axes ignored)."""
    expected = np.dtype(x.dtype).itemsize
    for n, s in zip(reversed(tuple(x.shape)), reversed(tuple(x.strides))):
        if n == 0:
            return True
        if n != 1 and s != expected:
            return False
        expected *= n
    return True
