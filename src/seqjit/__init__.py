"""seqjit: framework-free inference for seq2seq models (RNN, attention RNN, Transformer).

Kernels live in :mod:`seqjit.kernels` (NumPy reference, Numba, Cython, numba.cuda backends); models
are graphs (:mod:`seqjit.graph`) built by the architectures in :mod:`seqjit.models`.

    import seqjit
    model = seqjit.load("path/to/model")           # config.json + model.safetensors
    model = seqjit.from_hf("path/to/opus-mt-en-de") # a Hugging Face MarianMT directory
    model = seqjit.from_torch(state_dict, arch="transformer", encoder_heads=8, ...)
    model.save("out/")
    int8 = seqjit.quantize(model, "int8")            # int8 linear weights, per-row scales
    fp16 = seqjit.quantize(model, "float16")         # 16-bit weights ("bfloat16" too): docs/half_precision.md

The names below are imported on first use, so ``import seqjit`` stays fast (no Numba compile).
"""
from __future__ import annotations

import importlib
import os

# OpenMP worker threads that spin after a parallel region steal the cores BLAS threads need next
# (a decoder step many times slower on 2 cores); sleeping workers cost microseconds to wake.
# Set before any OpenMP runtime loads; a value the user set wins.
#: True when the OMP_WAIT_POLICY in os.environ is seqjit's (children that run other OpenMP programs,
#: e.g. a PyTorch peer in a benchmark, should not inherit it)
OMP_WAIT_POLICY_SET_BY_SEQJIT = "OMP_WAIT_POLICY" not in os.environ
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

from seqjit.kernels._threads import get_num_threads, set_num_threads

_LAZY = {
    "load": ("seqjit.models.io", "load_model"),
    "from_torch": ("seqjit.convert", "from_torch"),
    "from_hf": ("seqjit.convert", "from_hf"),
    "profile": ("seqjit.graph.profiler", "profile"),
    "quantize": ("seqjit.models.quantization", "quantize"),
    "Executor": ("seqjit.graph.executor", "Executor"),
    "TransformerConfig": ("seqjit.models.transformer", "TransformerConfig"),
    "TransformerModel": ("seqjit.models.transformer", "TransformerModel"),
    "ModelFormatError": ("seqjit.errors", "ModelFormatError"),
    "ConfigError": ("seqjit.errors", "ConfigError"),
    "GraphError": ("seqjit.errors", "GraphError"),
    "ShapeError": ("seqjit.errors", "ShapeError"),
    "NonFiniteLogits": ("seqjit.errors", "NonFiniteLogits"),
    "NothingGenerable": ("seqjit.errors", "NothingGenerable"),
    "MemoryBudgetExceeded": ("seqjit.errors", "MemoryBudgetExceeded"),
    "set_memory_limit": ("seqjit.decoding.limits", "set_memory_limit"),
}

__all__ = ["__version__", "get_num_threads", "set_num_threads", *_LAZY]


_SUBMODULES = ("convert", "decoding", "graph", "kernels", "models")


def __getattr__(name: str):
    if name in _SUBMODULES:  # ``seqjit.convert.from_hf(...)`` without importing seqjit.convert first
        return importlib.import_module(f"seqjit.{name}")
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'seqjit' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
