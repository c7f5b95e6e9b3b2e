"""Device names, and the registry a model consults to run anywhere but the CPU.

A model never imports a device's code. :meth:`Seq2SeqModel.to <seqjit.models.base.Seq2SeqModel.to>`
asks :func:`runtime_for` for a runtime of the device, built by the device's provider module
(:data:`PROVIDERS`, imported by name when a model first moves there, as :mod:`seqjit.kernels` finds
its backends by name), and keeps it. A runtime provides:

- ``device``: its name, what ``model.device`` reports; ``backend``: the kernel backend of the
  model's executors while it is there; ``placement``: given to those executors;
- ``upload(model)``: copy the weights the model's graphs read to the device (once, at the move);
- ``start(model, ...)``, ``start_from(model, ...)``, ``step(model, ...)``: the decoder-step contract
  (:mod:`seqjit.models.contract`) on the device;
- ``generate(model, sources, **arguments)``: :func:`seqjit.decoding.generate` on the device;
- ``supports(model, options, callback)``: the device path's declaration: what of a decode's options
  the device's own loops do not decode (in words), or None; :func:`seqjit.decoding.strategy.choose`
  reads it.

Importing this module imports no device code (no CUDA).
"""
from __future__ import annotations

import importlib

DEVICES = ("cpu", "cuda")
#: device name -> the module whose ``runtime(model)`` makes the model's runtime there
PROVIDERS = {"cuda": "seqjit.gpu.devices"}


def check_device(device) -> str:
    """``"cpu"`` or ``"cuda"`` for ``device`` (``"cuda:0"`` is ``"cuda"``); ValueError naming it otherwise."""
    if not isinstance(device, str) or not (device in DEVICES or device.startswith("cuda:")):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device.startswith("cuda:") and device != "cuda:0":
        raise ValueError(f"device {device!r}: seqjit runs on one GPU, 'cuda' (the current numba.cuda device)")
    return "cuda" if device.startswith("cuda") else "cpu"


def runtime_for(device: str, model):
    """A new runtime of ``device`` (checked, not ``"cpu"``) for ``model``, from its provider, which
    raises when the model cannot run there or the device is unusable (e.g.
    :class:`~seqjit.errors.CudaUnavailable`)."""
    return importlib.import_module(PROVIDERS[device]).runtime(model)
