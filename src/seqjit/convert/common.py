"""Helpers shared by the importers: tensors to NumPy, reading Hugging Face weight files."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from seqjit.errors import ModelFormatError


def to_numpy(name: str, value) -> np.ndarray:
    """A NumPy array from a NumPy array or a torch tensor (bfloat16 widened to float32), no torch
    import. Tensors are copied: later changes to the torch module do not reach the seqjit model."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        t = value.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.numpy().copy()
    raise TypeError(f"state_dict[{name!r}] must be a numpy.ndarray or a torch.Tensor, got {type(value).__name__}")


def to_numpy_dict(state_dict) -> dict:
    if not hasattr(state_dict, "items"):
        raise TypeError(f"state_dict must be a mapping of name -> array, got {type(state_dict).__name__}")
    return {str(k): to_numpy(str(k), v) for k, v in state_dict.items()}


def cast_floats(weights: dict, dtype: str) -> dict:
    """Every float array as ``dtype`` (C-contiguous); integer arrays are refused by the spec check later."""
    dt = np.dtype(dtype)
    return {k: np.ascontiguousarray(v, dtype=dt) if v.dtype.kind == "f" else v for k, v in weights.items()}


def read_hf_weights(directory: Path) -> dict:
    """All tensors of ``model.safetensors`` (or the shards named by ``model.safetensors.index.json``)."""
    from seqjit.models.io import read_json, read_safetensors

    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.exists():
        return read_safetensors(single)[0]
    if index.exists():
        shards = read_json(index).get("weight_map")
        if not isinstance(shards, dict):
            raise ModelFormatError(f"{index} has no weight_map object")
        tensors = {}
        for shard in sorted(set(shards.values())):
            tensors.update(read_safetensors(directory / shard)[0])
        return tensors
    raise ModelFormatError(f"{directory} has no model.safetensors (nor a sharded model.safetensors.index.json)")


def unused_error(source: str, unused) -> ModelFormatError:
    names = sorted(unused)
    shown = ", ".join(names[:8]) + (f" ... and {len(names) - 8} more" if len(names) > 8 else "")
    return ModelFormatError(f"{source}: unexpected weight(s) the importer does not know: {shown}")
