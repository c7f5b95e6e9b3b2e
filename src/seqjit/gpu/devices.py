"""Device names, and moving a model between the CPU and the GPU (importing this module imports no
CUDA: numba.cuda is imported once a move to the GPU has checked that it can run).

:func:`move` (``model.to(device)``) checks that the model can run on the cuda kernels (float32, not
quantized) and that a GPU (or numba's simulator) is usable, then builds the model's encoder and
decoder-step executors on the cuda backend with one shared
:class:`~seqjit.graph.device_plan.DevicePlacement` and uploads every weight they read, once (an
out-of-memory shows up here, as :class:`~seqjit.errors.DeviceOutOfMemory`), and attaches a
:class:`~seqjit.gpu.runtime.DeviceRuntime`. ``model.to("cpu")`` drops it, and with it the device copies.
"""
from __future__ import annotations

import numpy as np

DEVICES = ("cpu", "cuda")


def check_device(device) -> str:
    """``"cpu"`` or ``"cuda"`` for ``device`` (``"cuda:0"`` is ``"cuda"``); ValueError naming it otherwise."""
    if not isinstance(device, str) or not (device in DEVICES or device.startswith("cuda:")):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device.startswith("cuda:") and device != "cuda:0":
        raise ValueError(f"device {device!r}: seqjit runs on one GPU, 'cuda' (the current numba.cuda device)")
    return "cuda" if device.startswith("cuda") else "cpu"


def _check_model(model) -> None:
    config = model.config
    if np.dtype(getattr(config, "dtype", "float32")) != np.float32:
        raise TypeError(f"the cuda kernels compute in float32; this model is {config.dtype}: convert it to float32 "
                        "to run it on the GPU")
    if getattr(config, "quantization", "none") != "none":
        raise ValueError(f"{config.quantization} models run on the CPU only; the GPU path runs float32 models")


def move(model, device):
    """``model`` on ``device`` ("cpu" or "cuda"); returns the model (moved in place)."""
    target = check_device(device)
    if target == model.device:
        return model
    if target == "cpu":
        with model._executors_lock:
            model._gpu, model.backend, model._executors = None, model._cpu_backend, {}
        return model
    _check_model(model)
    from seqjit.kernels._cuda import require_cuda

    require_cuda()  # CudaUnavailable, naming what is missing, before anything imports numba.cuda
    from seqjit.graph.device_plan import DevicePlacement

    from .runtime import DeviceRuntime

    runtime = DeviceRuntime(DevicePlacement())
    with model._executors_lock:
        model._cpu_backend = model.backend
        model._gpu, model.backend, model._executors = runtime, "cuda", {}
    try:
        for name in ("encoder", "decoder_step"):  # the weights each graph reads: uploaded now, once
            for value in model.executor(name).graph.constants.values():
                runtime.placement.constant(value)
    except BaseException:
        with model._executors_lock:
            model._gpu, model.backend, model._executors = None, model._cpu_backend, {}
        raise
    return model
