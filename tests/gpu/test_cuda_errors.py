"""The cuda backend's errors: CudaUnavailable names what is missing, device out-of-memory is named.

The no-driver cases run numba.cuda in a child process without the simulator (the switch is read when
numba.cuda is first imported); they are skipped on a machine with a GPU, where the backend is usable.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from seqjit import errors, kernels
from seqjit.kernels import _cuda

HAS_GPU = os.path.exists("/dev/nvidia0")


def _cuda_or_skip():
    try:
        return _cuda.require_cuda()
    except errors.CudaUnavailable as exc:
        pytest.skip(f"no GPU and no CUDA simulator: {exc}")


def _child(code: str, env: dict) -> str:
    """Run ``code`` in a fresh interpreter with ``env`` overriding os.environ; return what it printed."""
    full_env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full_env.update(env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cuda_unavailable_is_one_typed_error():
    assert _cuda.CudaUnavailable is errors.CudaUnavailable
    assert issubclass(errors.CudaUnavailable, kernels.KernelUnavailable)
    assert issubclass(errors.DeviceOutOfMemory, MemoryError)


def test_missing_numba_cuda_package_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba.cuda", None)  # import numba.cuda now fails as if not installed
    with pytest.raises(errors.CudaUnavailable, match=r"needs the numba-cuda package.*pip install"):
        _cuda.require_cuda()


_REPORT = """
    from seqjit import errors, kernels
    from seqjit.kernels._cuda import require_cuda
    for call in (require_cuda, lambda: kernels.get("linear", backend="cuda")):
        try:
            call()
            print("usable")
        except errors.CudaUnavailable as exc:
            print("CudaUnavailable:", exc)
    print("backends:", kernels.backends("linear"))
"""


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: the cuda backend is usable without the simulator")
def test_no_driver_or_gpu_is_named_with_the_simulator_hint():
    lines = _child(_REPORT, {}).splitlines()
    for line in lines[:2]:
        assert line.startswith("CudaUnavailable: the cuda backend found no usable NVIDIA GPU: ")
        assert "NVIDIA driver" in line and "NUMBA_ENABLE_CUDASIM=1" in line
    assert "cuda" not in lines[2] and "numba" in lines[2]  # the registry leaves the unusable backend out


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: the cuda backend is usable without the simulator")
def test_simulator_switched_on_too_late_is_named():
    code = "import os, numba.cuda\nos.environ['NUMBA_ENABLE_CUDASIM'] = '1'\n" + textwrap.dedent(_REPORT)
    line = _child(code, {"NUMBA_ENABLE_CUDASIM": "0"}).splitlines()[0]
    assert line.startswith("CudaUnavailable: NUMBA_ENABLE_CUDASIM=1 is set but numba.cuda was imported before it was")


def test_device_out_of_memory_names_the_array():
    _cuda_or_skip()
    shape = (1 << 22, 1 << 23)  # 128 TiB of float32: more than any GPU (or the simulator's host) holds
    with pytest.raises(errors.DeviceOutOfMemory, match=r"float32 array of shape \[4194304, 8388608\] \(131072.0 GiB\)"):
        _cuda.device_empty(shape, np.float32)


def test_driver_out_of_memory_in_a_kernel_call_is_named(monkeypatch):
    """numba's CudaAPIError(CUDA_ERROR_OUT_OF_MEMORY) from the driver becomes DeviceOutOfMemory; other
    driver errors pass through unchanged."""
    cuda = _cuda_or_skip()
    from numba.cuda.cudadrv.driver import CudaAPIError

    def failing(code):
        def allocate(*args, **kwargs):
            raise CudaAPIError(code, "cuMemAlloc failed")
        return allocate

    linear = kernels.get("linear", backend="cuda")
    x, w = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    monkeypatch.setattr(cuda, "device_array", failing(2))
    with pytest.raises(errors.DeviceOutOfMemory, match=r"allocating a device buffer: a float32 array of shape \[2, 4\]"):
        linear(x, w)
    monkeypatch.setattr(cuda, "to_device", failing(2))
    with pytest.raises(errors.DeviceOutOfMemory, match=r"allocating an uploaded array: a float32 array of shape \[3, 4\]"):
        _cuda.to_device(np.zeros((3, 4), np.float32))
    monkeypatch.setattr(cuda, "to_device", failing(700))  # CUDA_ERROR_ILLEGAL_ADDRESS: not memory
    with pytest.raises(CudaAPIError):
        _cuda.to_device(np.zeros(3, np.float32))
