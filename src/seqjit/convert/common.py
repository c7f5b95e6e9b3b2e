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


def read_hf_weights(directory: Path, *, allow_nonfinite: bool = False) -> dict:
    """All tensors of ``model.safetensors`` (or of the shards named by ``model.safetensors.index.json``,
    whose ``weight_map`` must map tensor names to shard file names inside ``directory``)."""
    from seqjit.models.files import INDEX_MAX_BYTES, model_file, read_json
    from seqjit.models.io import read_safetensors

    single = model_file(directory, "model.safetensors")
    index = model_file(directory, "model.safetensors.index.json")
    if single.exists() or not index.exists():
        if not single.exists():
            raise ModelFormatError(f"{directory} has no model.safetensors (nor a sharded model.safetensors.index.json)")
        return read_safetensors(single, allow_nonfinite=allow_nonfinite)[0]
    weight_map = read_json(index, max_bytes=INDEX_MAX_BYTES).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ModelFormatError(f"{index}: 'weight_map' must be an object mapping tensor names to shard file names")
    tensors: dict = {}
    for shard in sorted(set(weight_map.values())):
        path = model_file(directory, shard)
        part = read_safetensors(path, allow_nonfinite=allow_nonfinite)[0]
        twice = sorted(set(part) & set(tensors))
        if twice:
            raise ModelFormatError(f"{path}: tensor(s) {', '.join(twice[:8])} also appear in another shard")
        tensors.update(part)
    absent = sorted(name for name in weight_map if name not in tensors)
    if absent:
        raise ModelFormatError(f"{index} lists tensor(s) no shard holds: {', '.join(absent[:8])}")
    return tensors


def unused_error(source: str, unused) -> ModelFormatError:
    names = sorted(unused)
    shown = ", ".join(names[:8]) + (f" ... and {len(names) - 8} more" if len(names) > 8 else "")
    return ModelFormatError(f"{source}: unexpected weight(s) the importer does not know: {shown}")
