"""The GPU's provider in the device registry (:mod:`seqjit.models.devices`): importing this module
imports no CUDA; numba.cuda is imported once a move to the GPU has checked that it can run.

:func:`runtime` (asked for by ``model.to("cuda")``) checks that the model can run on the cuda kernels
(float32, or with 16-bit weights; not int8) and that a GPU (or numba's simulator) is usable, and makes a
:class:`~seqjit.gpu.runtime.DeviceRuntime` with one shared
:class:`~seqjit.graph.device_plan.DevicePlacement`; the model then builds its executors on the cuda
backend and the runtime uploads every weight they read, once (an out-of-memory shows up there, as
:class:`~seqjit.errors.DeviceOutOfMemory`). ``model.to("cpu")`` drops the runtime, and with it the
device copies.
"""
from __future__ import annotations

import numpy as np


def _check_model(model) -> None:
    config = model.config
    if np.dtype(getattr(config, "dtype", "float32")) != np.float32:
        raise TypeError(f"the cuda kernels compute in float32; this model is {config.dtype}: convert it to float32 "
                        "to run it on the GPU")
    if getattr(config, "quantization", "none") not in ("none", "float16", "bfloat16"):  # 16-bit: linear_half/cuda.py
        raise ValueError(f"{config.quantization} models run on the CPU only; the GPU path runs float32 models and "
                         "models with 16-bit weights (float16, bfloat16)")


def runtime(model):
    """A :class:`~seqjit.gpu.runtime.DeviceRuntime` for ``model`` (the provider of ``"cuda"`` in
    :data:`seqjit.models.devices.PROVIDERS`), once the model can run on the cuda kernels and a GPU (or
    the simulator) is usable."""
    _check_model(model)
    from seqjit.kernels._cuda import require_cuda

    require_cuda()  # CudaUnavailable, naming what is missing, before anything imports numba.cuda
    from seqjit.graph.device_plan import DevicePlacement

    from .runtime import DeviceRuntime

    return DeviceRuntime(DevicePlacement())
