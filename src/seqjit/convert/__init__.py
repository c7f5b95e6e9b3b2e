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
    "bart": "seqjit.convert.hf_bart:from_hf_bart",
    "mbart": "seqjit.convert.hf_bart:from_hf_bart",
    "m2m_100": "seqjit.convert.hf_bart:from_hf_bart",
    "pegasus": "seqjit.convert.hf_bart:from_hf_bart",
    "t5": "seqjit.convert.hf_t5:from_hf_t5",
    "mt5": "seqjit.convert.hf_t5:from_hf_t5",
}


def register_torch_importer(arch: str, target: str) -> None:
    """Register ``"package.module:function"`` as the ``from_torch`` importer of ``arch``."""
    FROM_TORCH[arch] = target


def _resolve(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def from_torch(state_dict, arch: str = "transformer", *, device: str = "cpu", allow_nonfinite: bool = False,
               **config):
    """A seqjit model from a PyTorch ``state_dict`` (values: NumPy arrays or torch tensors) of
    architecture ``arch``; ``config`` gives what the weights cannot tell (heads, activation, ...).
    See the importer of each architecture for the expected names (``transformer``:
    :func:`seqjit.convert.torch_transformer.from_torch_transformer`). ``device="cuda"``: on the GPU.
    Weights holding NaN or Inf are refused with a :class:`~seqjit.errors.ModelFormatError`, as
    :func:`seqjit.load` refuses them, unless ``allow_nonfinite``."""
    from seqjit.convert.common import to_numpy_dict
    from seqjit.models.devices import check_device
    from seqjit.models.weights_file import check_finite

    check_device(device)

    try:
        target = FROM_TORCH[arch]
    except (KeyError, TypeError):
        raise ValueError(f"from_torch: unknown arch {arch!r}; known: {', '.join(sorted(FROM_TORCH))}") from None
    weights = to_numpy_dict(state_dict)
    if not allow_nonfinite:
        check_finite("state_dict", weights)
    model = _resolve(target)(weights, **config)
    return model.prepare() if device == "cpu" else model.to(device)


def from_hf(path, *, backend=None, dtype: str = "float32", allow_nonfinite: bool = False, device: str = "cpu"):
    """A seqjit model from a Hugging Face model directory (``config.json`` + ``model.safetensors``, or
    shards named by ``model.safetensors.index.json``); supported ``model_type``: see :data:`FROM_HF`.
    Files are read as :func:`seqjit.load` reads them (regular files inside the directory, or the hub
    cache's blobs; config sizes bounded; NaN/Inf weights refused unless ``allow_nonfinite``); a config
    problem raises :class:`~seqjit.errors.ModelConfigError`. ``pytorch_model.bin`` (a pickle) is
    refused with the command that converts it. ``device="cuda"`` runs the model on the GPU."""
    from pathlib import Path

    from seqjit.errors import ConfigError, ModelConfigError, ModelFormatError
    from seqjit.models.devices import check_device
    from seqjit.models.io import CONFIG, model_file, read_json, refuse_pickles

    check_device(device)
    directory = Path(path)
    if not directory.is_dir():
        raise ModelFormatError(f"{directory} is not a Hugging Face model directory (expected config.json and model.safetensors)")
    refuse_pickles(directory)
    config_path = model_file(directory, CONFIG)
    hf_config = read_json(config_path)
    model_type = hf_config.get("model_type")
    if not isinstance(model_type, str) or model_type not in FROM_HF:
        shown = repr(model_type)[:60]
        raise ModelFormatError(f"{config_path}: model_type {shown} is not supported; supported: {', '.join(sorted(FROM_HF))}")
    try:
        model = _resolve(FROM_HF[model_type])(directory, hf_config, backend=backend, dtype=dtype,
                                              allow_nonfinite=allow_nonfinite)
        return model.prepare() if device == "cpu" else model.to(device)
    except ConfigError as exc:
        if isinstance(exc, ModelFormatError):
            raise
        raise ModelConfigError(str(exc) if str(config_path) in str(exc) else f"{config_path}: {exc}") from None


def from_joeynmt(state_dict, cfg: dict, **config):
    """A JoeyNMT recurrent model from its in-memory ``state_dict`` and the ``model:`` section of its
    config: :func:`seqjit.convert.joeynmt_rnn.from_joeynmt`."""
    from seqjit.convert.joeynmt_rnn import from_joeynmt as convert

    return convert(state_dict, cfg, **config)


def from_opennmt(state_dict, opt: dict, **config):
    """An OpenNMT-py RNN model from its in-memory ``state_dict`` (generator included) and its
    options dict: :func:`seqjit.convert.opennmt_rnn.from_opennmt`."""
    from seqjit.convert.opennmt_rnn import from_opennmt as convert

    return convert(state_dict, opt, **config)


def from_keras(path, **config):
    """A Keras 3 LSTM/GRU encoder-decoder with attention from its ``.keras`` / ``.h5`` file (read
    with h5py, nothing executed): :func:`seqjit.convert.keras_rnn.from_keras`."""
    from seqjit.convert.keras_rnn import from_keras as convert

    return convert(path, **config)


__all__ = ["from_torch", "from_hf", "from_joeynmt", "from_opennmt", "from_keras", "FROM_TORCH", "FROM_HF", "register_torch_importer"]
