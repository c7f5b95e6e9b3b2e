"""Model directories: ``config.json`` + ``model.safetensors``. Loading never executes code.

- ``config.json``: ``{"architecture": ..., "format_version": 1, <the architecture's config>}``; the
  graphs are rebuilt from it by the architecture's builder.
- ``model.safetensors``: the weights (safetensors' NumPy API), with a CRC-32 per tensor in the
  metadata so a corrupted data region is detected, not just a broken header
  (:mod:`seqjit.models.weights_file`).

:func:`load_model` (``seqjit.load``) trusts nothing in the directory, and checks, in this order:

- both files are regular files inside the directory (a symlink leading out, a FIFO or a link to
  ``/dev/zero`` is refused); ``config.json`` is at most 1 MiB (:mod:`seqjit.models.files`);
- the config: known architecture and keys, values of the right kind, floats finite, sizes within
  the limits of :mod:`seqjit.models.config` (layers <= 1024, ``max_positions`` <= 65536);
- the weights' header against the config (names, shapes, dtypes: a 16-bit model's 16-bit weights
  must be stored as its format, ``F16`` or ``BF16``), before any tensor is read;
- the checksums (a file without them loads with a :class:`~seqjit.errors.ChecksumWarning`);
- NaN and Inf in every float weight (``allow_nonfinite=True`` loads them anyway).

A config problem raises :class:`~seqjit.errors.ModelConfigError` (both a ConfigError and a
ModelFormatError); every other problem :class:`~seqjit.errors.ModelFormatError`; both name the
file. A directory holding only ``pytorch_model.bin`` is refused: that format is a pickle, which can
run code when loaded; the message gives the command that converts it.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from seqjit.errors import ConfigError, ModelConfigError, ModelFormatError
from seqjit.models.files import model_file, read_json, write_replacing
from seqjit.models.weights_file import read_safetensors, write_safetensors

CONFIG, WEIGHTS = "config.json", "model.safetensors"
PICKLES = ("pytorch_model.bin", "model.bin", "model.pt", "model.pth")


def pickle_conversion_command(path, target) -> str:
    """A shell command that converts the PyTorch state dict pickled at ``path`` into safetensors file
    ``target``. Each tensor is cloned: a state dict with tied weights (Marian's shared embeddings,
    ``lm_head``) holds tensors sharing memory, which safetensors refuses to save."""
    code = ("import torch; from safetensors.torch import save_file; "
            f"sd = torch.load({str(path)!r}, map_location='cpu', weights_only=True); "
            f"save_file({{k: v.detach().clone().contiguous() for k, v in sd.items()}}, {str(target)!r})")
    return shlex.join(["python", "-c", code])


def refuse_pickles(directory: Path) -> None:
    for name in PICKLES:
        if (directory / name).exists() and not (directory / WEIGHTS).exists():
            path = directory / name
            raise ModelFormatError(
                f"{path} is a PyTorch pickle; seqjit never loads pickles (unpickling can run arbitrary code). Convert "
                f"it once, where you trust the file, with: {pickle_conversion_command(path, directory / WEIGHTS)}  "
                "(or load it with transformers and call save_pretrained(dir, safe_serialization=True))")


def save_model(model, path) -> None:
    """Write ``model``'s ``config.json`` and ``model.safetensors`` (with checksums) into directory ``path``."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    from seqjit.models.quantization import half_format

    write_safetensors(directory / WEIGHTS, model.weights, {"format": "seqjit", "architecture": model.arch},
                      half_format=half_format(model.config))
    text = json.dumps(model.config.to_dict(), indent=2, sort_keys=True) + "\n"
    write_replacing(directory / CONFIG, text)  # a link planted at config.json is replaced, not followed


def load_model(path, *, backend=None, allow_nonfinite: bool = False, device: str = "cpu"):
    """The model saved in directory ``path``, checked as the module docstring says.
    ``allow_nonfinite=True`` loads weights holding NaN or Inf (refused by default). ``device="cuda"``
    runs it on the GPU (:meth:`~seqjit.models.base.Seq2SeqModel.to`)."""
    from seqjit.models.devices import check_device
    from seqjit.models import model_class

    check_device(device)
    directory = Path(path)
    if not directory.is_dir():
        raise ModelFormatError(f"{directory} is not a model directory (expected a folder with {CONFIG} and {WEIGHTS})")
    refuse_pickles(directory)
    config_path = model_file(directory, CONFIG)
    data = read_json(config_path)
    try:
        if "architecture" not in data:
            raise ConfigError("missing key 'architecture' (the model's architecture: transformer, rnn_seq2seq, ...)")
        if not isinstance(data["architecture"], str):
            raise ConfigError(f"'architecture' must be a string, got {type(data['architecture']).__name__}")
        cls = model_class(data["architecture"])
        config = cls.config_class.from_dict(data, where=str(config_path))
    except ConfigError as exc:
        raise ModelConfigError(str(exc) if str(directory) in str(exc) else f"{config_path}: {exc}") from None
    weights_path = model_file(directory, WEIGHTS)
    from seqjit.models.quantization import half_format

    weights, _ = read_safetensors(weights_path, spec=cls.weight_spec(config), warn_unchecked=True,
                                  allow_nonfinite=allow_nonfinite, half_format=half_format(config))
    model = cls(config, weights, backend=backend, source=str(weights_path))
    return model.prepare() if device == "cpu" else model.to(device)


__all__ = ["load_model", "save_model", "read_json", "read_safetensors", "write_safetensors", "refuse_pickles",
           "pickle_conversion_command", "model_file", "CONFIG", "WEIGHTS"]
