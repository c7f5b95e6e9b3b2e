"""Model directories: ``config.json`` + ``model.safetensors``. Loading never executes code.

- ``config.json``: ``{"architecture": ..., "format_version": 1, <the architecture's config>}``; the
  graphs are rebuilt from it by the architecture's builder.
- ``model.safetensors``: the weights (safetensors' NumPy API), with a CRC-32 per tensor in the
  metadata so a corrupted data region is detected, not just a broken header.

Every problem raises :class:`~seqjit.errors.ModelFormatError` naming the file: a missing file, bad
JSON, an unknown architecture or config key, a truncated or corrupted safetensors file, a checksum
mismatch, and any weight missing, unexpected, misshapen or of the wrong dtype. A directory holding
only ``pytorch_model.bin`` is refused: that format is a pickle, which can run code when loaded.
"""
from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import numpy as np

from seqjit.errors import ConfigError, ModelFormatError

CONFIG, WEIGHTS = "config.json", "model.safetensors"
_CRC_KEY = "seqjit.crc32"

PICKLE_REFUSAL = (
    "{path} is a PyTorch pickle; seqjit never loads pickles (unpickling can run arbitrary code). "
    "Convert it once, where you trust the file, with: python -c \"import torch; from safetensors.torch import "
    "save_file; sd = torch.load('{path}', weights_only=True); save_file({{k: v.contiguous() for k, v in sd.items()}}, "
    "'{target}')\"  (or transformers' save_pretrained(dir, safe_serialization=True))"
)


def refuse_pickles(directory: Path) -> None:
    for name in ("pytorch_model.bin", "model.bin", "model.pt", "model.pth"):
        if (directory / name).exists() and not (directory / WEIGHTS).exists():
            raise ModelFormatError(PICKLE_REFUSAL.format(path=directory / name, target=directory / WEIGHTS))


def read_json(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFormatError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{path} cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFormatError(f"{path} is not valid JSON ({exc}); the file is truncated or corrupted") from None
    if not isinstance(data, dict):
        raise ModelFormatError(f"{path} must hold a JSON object, got {type(data).__name__}")
    return data


def read_safetensors(path: Path, *, verify: bool = True) -> tuple[dict, dict]:
    """``(tensors, metadata)`` of a safetensors file, as NumPy arrays; errors name the file."""
    from safetensors import SafetensorError, safe_open

    if not path.exists():
        raise ModelFormatError(f"{path} does not exist")
    try:
        tensors = {}
        with safe_open(str(path), framework="np") as f:
            metadata = dict(f.metadata() or {})
            for name in f.keys():
                tensors[name] = f.get_tensor(name)
    except (SafetensorError, OSError, ValueError, TypeError) as exc:
        raise ModelFormatError(f"{path} is not a readable safetensors file ({exc}); it is truncated, corrupted or "
                               "uses a dtype NumPy lacks (bfloat16)") from None
    if verify and _CRC_KEY in metadata:
        try:
            expected = json.loads(metadata[_CRC_KEY])
        except json.JSONDecodeError:
            raise ModelFormatError(f"{path}: the checksum metadata is corrupted") from None
        for name, arr in tensors.items():
            if name in expected and _crc(arr) != expected[name]:
                raise ModelFormatError(f"{path}: tensor {name!r} fails its CRC-32 check; the file is corrupted")
    return tensors, metadata


def write_safetensors(path: Path, tensors: dict, metadata: dict | None = None) -> None:
    from safetensors.numpy import save_file

    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    meta = dict(metadata or {})
    meta[_CRC_KEY] = json.dumps({k: _crc(v) for k, v in tensors.items()}, sort_keys=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=meta)
    os.chmod(tmp, 0o644)  # safetensors creates the file owner-only; a model is data others may read
    os.replace(tmp, path)


def _crc(arr: np.ndarray) -> int:
    return zlib.crc32(memoryview(np.ascontiguousarray(arr)).cast("B"))


def save_model(model, path) -> None:
    """Write ``model``'s ``config.json`` and ``model.safetensors`` into directory ``path``."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    write_safetensors(directory / WEIGHTS, model.weights, {"format": "seqjit", "architecture": model.arch})
    text = json.dumps(model.config.to_dict(), indent=2, sort_keys=True) + "\n"
    (directory / CONFIG).write_text(text, encoding="utf-8")


def load_model(path, *, backend=None):
    """The model saved in directory ``path`` (see the module docstring)."""
    from seqjit.models import model_class

    directory = Path(path)
    if not directory.is_dir():
        raise ModelFormatError(f"{directory} is not a model directory (expected a folder with {CONFIG} and {WEIGHTS})")
    refuse_pickles(directory)
    data = read_json(directory / CONFIG)
    arch = data.get("architecture")
    try:
        cls = model_class(arch)
        config = cls.config_class.from_dict(data, where=str(directory / CONFIG))
    except ConfigError as exc:
        raise ModelFormatError(str(exc) if str(directory) in str(exc) else f"{directory / CONFIG}: {exc}") from None
    weights, _ = read_safetensors(directory / WEIGHTS)
    return cls(config, weights, backend=backend, source=str(directory / WEIGHTS))
