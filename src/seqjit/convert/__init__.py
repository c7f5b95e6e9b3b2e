"""Importers: PyTorch state dicts (:func:`from_torch`) and Hugging Face directories (:func:`from_hf`).

Neither imports torch or transformers at module import, and neither unpickles anything:
``from_torch`` takes an in-memory state dict (NumPy arrays or torch tensors), ``from_hf`` reads
``config.json`` + ``*.safetensors`` only.

``from_torch`` dispatches on ``arch`` through :data:`FROM_TORCH` (name -> ``"module:function"``);
an architecture adds its importer with one line there (or :func:`register_torch_importer`). The
function is called as ``fn(state_dict, **config)`` with NumPy arrays and returns a model.
"""
from __future__ import annotations

import importlib

FROM_TORCH: dict = {
    "transformer": "seqjit.convert.torch_transformer:from_torch_transformer",
    "rnn_seq2seq": "seqjit.convert.torch_rnn:from_torch_rnn_seq2seq",
    "attention_seq2seq": "seqjit.convert.torch_rnn:from_torch_attention_seq2seq",
}

FROM_HF: dict = {
    "marian": "seqjit.convert.hf_marian:from_hf_marian",
}


def register_torch_importer(arch: str, target: str) -> None:
    """Register ``"package.module:function"`` as the ``from_torch`` importer of ``arch``."""
    FROM_TORCH[arch] = target


def _resolve(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def from_torch(state_dict, arch: str = "transformer", **config):
    """A seqjit model from a PyTorch ``state_dict`` (values: NumPy arrays or torch tensors) of
    architecture ``arch``; ``config`` gives what the weights cannot tell (heads, activation, ...).
    See the importer of each architecture for the expected names (``transformer``:
    :func:`seqjit.convert.torch_transformer.from_torch_transformer`)."""
    from seqjit.convert.common import to_numpy_dict

    try:
        target = FROM_TORCH[arch]
    except (KeyError, TypeError):
        raise ValueError(f"from_torch: unknown arch {arch!r}; known: {', '.join(sorted(FROM_TORCH))}") from None
    return _resolve(target)(to_numpy_dict(state_dict), **config)


def from_hf(path, *, backend=None, dtype: str = "float32"):
    """A seqjit model from a Hugging Face model directory (``config.json`` + ``model.safetensors``);
    supported ``model_type``: see :data:`FROM_HF`. ``pytorch_model.bin`` (a pickle) is refused with
    the command that converts it."""
    from pathlib import Path

    from seqjit.models.io import CONFIG, read_json, refuse_pickles
    from seqjit.errors import ModelFormatError

    directory = Path(path)
    if not directory.is_dir():
        raise ModelFormatError(f"{directory} is not a Hugging Face model directory (expected config.json and model.safetensors)")
    refuse_pickles(directory)
    hf_config = read_json(directory / CONFIG)
    model_type = hf_config.get("model_type")
    if model_type not in FROM_HF:
        raise ModelFormatError(f"{directory / CONFIG}: model_type {model_type!r} is not supported; supported: {', '.join(sorted(FROM_HF))}")
    return _resolve(FROM_HF[model_type])(directory, hf_config, backend=backend, dtype=dtype)


__all__ = ["from_torch", "from_hf", "FROM_TORCH", "FROM_HF", "register_torch_importer"]
