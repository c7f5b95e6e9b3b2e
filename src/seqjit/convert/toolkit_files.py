"""What ``seqjit convert SRC OUT --from joeynmt|opennmt`` reads: the weights, the toolkit's options
and its vocabularies, from the files a toolkit leaves (:func:`read_toolkit`).

SRC is either the state dict exported to safetensors (read with safetensors, never unpickled) or the
toolkit's own checkpoint (``best.ckpt`` / ``model_step_N.pt``), read without torch by
:mod:`seqjit.convert.torch_checkpoint`: a restricted unpickler that builds NumPy arrays and plain
containers and runs no code. An OpenNMT-py checkpoint also holds its options as an
``argparse.Namespace``, the one class admitted besides, read as plain data.

- JoeyNMT: ``--config`` the training config (YAML, needs PyYAML; or JSON), its ``model:`` section
  giving the architecture and its ``data:`` section the tokenisation; a JSON object holding the
  ``model:`` section alone is accepted too. Vocabularies: ``--src-vocab`` / ``--tgt-vocab``, else
  ``src_vocab.txt`` / ``trg_vocab.txt`` beside SRC (where JoeyNMT saves them), else the config's
  ``voc_file``; none found: no text codec (ids only).

A file named *inside* a checkpoint or config (``voc_file``, ``tokenizer_cfg.model_file``,
``src_subword_model``...) is read only from the directory of the file that names it (the
checkpoint's; the config's, or SRC's), as named when relative, else by its base name; one anywhere
else is refused (a ConfigError naming the option and the flag to give it with: ``--src-vocab``,
``--src-spm``...): a file from elsewhere must never end up copied into the converted model because a
checkpoint said so. SentencePiece models are read bounded and must load as one before anything is
written.
- OpenNMT-py: the checkpoint's ``opt`` and ``vocab``; with a safetensors SRC, ``--config`` gives
  ``vars(checkpoint["opt"])`` as JSON and ``--src-vocab`` / ``--tgt-vocab`` the vocab files.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from seqjit.errors import ConfigError, ModelFormatError
from seqjit.models.files import model_file

CHECKPOINT_SUFFIXES = (".pt", ".ckpt", ".pth")


def _torch_load(path: Path, *, namespace: bool):
    from seqjit.convert.torch_checkpoint import read_checkpoint

    return read_checkpoint(path, namespace=namespace)


def read_toolkit(src, source: str, config: dict | None, *, src_vocab=None, tgt_vocab=None, src_spm=None,
                 tgt_spm=None, config_dir=None) -> tuple:
    """(state_dict, options for ``from_<source>``, vocabulary for :func:`toolkit_vocab.write` or None,
    description) from the files of a JoeyNMT or OpenNMT-py model (module docstring); ``config``: the
    toolkit's options as read from ``--config`` (None: not given), ``config_dir`` the directory of
    its file (None: given inline); ``src_spm`` / ``tgt_spm``: SentencePiece models given by the user
    (``--src-spm`` / ``--tgt-spm``). A file an option names is read only from inside the directory of
    the file naming it (the checkpoint's; the config's, or SRC's: :func:`toolkit_vocab.named_file`)."""
    from seqjit.convert import toolkit_vocab

    src = Path(src)
    spm_files = (src_spm, tgt_spm)
    bases = [src.parent] if config_dir is None else list(dict.fromkeys([Path(config_dir), src.parent]))
    checkpoint = src.suffix in CHECKPOINT_SUFFIXES
    if not checkpoint and src.suffix != ".safetensors":
        raise ValueError(f"--from {source}: SRC {src} must be the toolkit's checkpoint ({', '.join(CHECKPOINT_SUFFIXES)}) "
                         "or its state dict exported to .safetensors")
    if source == "opennmt" and checkpoint:
        ckpt = _torch_load(src, namespace=True)
        if not isinstance(ckpt, dict) or not {"model", "generator", "opt"} <= set(ckpt):
            raise ModelFormatError(f"{src}: not an OpenNMT-py checkpoint (no 'model', 'generator' and 'opt' entries)")
        if config is not None:
            raise ValueError("--config: an OpenNMT-py checkpoint carries its own options")
        state_dict = {**ckpt["model"], **{"generator." + k: v for k, v in ckpt["generator"].items()}}
        options = vars(ckpt["opt"]) if isinstance(ckpt["opt"], argparse.Namespace) else ckpt["opt"]
        vocab = ckpt.get("vocab") if src_vocab is None else None
        files = (src_vocab, tgt_vocab) if src_vocab is not None else (None, None)
        words = (toolkit_vocab.opennmt_vocab(options, vocab, *files, base=src.parent, spm_files=spm_files)
                 if vocab or src_vocab else None)
        return state_dict, options, words, f"OpenNMT-py checkpoint ({len(state_dict)} tensors)"
    if checkpoint:  # JoeyNMT
        ckpt = _torch_load(src, namespace=False)
        if not isinstance(ckpt, dict) or "model_state" not in ckpt:
            raise ModelFormatError(f"{src}: not a JoeyNMT checkpoint (no 'model_state' entry)")
        state_dict, kind = ckpt["model_state"], f"JoeyNMT checkpoint ({len(ckpt['model_state'])} tensors)"
    else:
        from seqjit.models.io import read_safetensors

        state_dict, _ = read_safetensors(src, verify=False)
        kind = f"{source} state dict ({len(state_dict)} tensors)"
    if config is None:
        raise ValueError(f"--from {source} needs the toolkit's options as --config (JoeyNMT: its config YAML or the "
                         "'model:' section as JSON; OpenNMT-py: vars(checkpoint['opt']) as JSON, unless SRC is the "
                         "checkpoint)")
    options = config
    if source == "opennmt":
        words = (toolkit_vocab.opennmt_vocab(options, None, src_vocab, tgt_vocab, base=bases, spm_files=spm_files)
                 if src_vocab else None)
        return state_dict, options, words, kind
    data = options.get("data") if "model" in options else None
    model_cfg = options["model"] if "model" in options else options
    if not isinstance(model_cfg, dict):
        raise ConfigError("--config: JoeyNMT's 'model:' section must be a mapping")
    files = []
    for given, name, side in ((src_vocab, "src_vocab.txt", "src"), (tgt_vocab, "trg_vocab.txt", "trg")):
        found = Path(given) if given is not None else model_file(src.parent, name)  # no link leading out
        if given is None and not found.is_file() and isinstance(data, dict) and (data.get(side) or {}).get("voc_file"):
            flag = "--src-vocab" if side == "src" else "--tgt-vocab"
            found = toolkit_vocab.named_file(data[side]["voc_file"], f"data.{side}.voc_file", bases, flag)
        files.append(found if given is not None or os.path.lexists(found) else None)
    if None in files:
        return state_dict, model_cfg, None, kind
    return state_dict, model_cfg, toolkit_vocab.joeynmt_vocab(data, *files, base=bases, spm_files=spm_files), kind


__all__ = ["CHECKPOINT_SUFFIXES", "read_toolkit"]
