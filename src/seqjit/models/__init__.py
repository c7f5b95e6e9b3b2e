"""Architectures. Each is registered here by name as ``"module:Class"`` (imported on first use) so
``seqjit.load`` can rebuild a model from ``config.json``'s ``"architecture"``. To add one, add a
line to :data:`ARCHITECTURES` (or call :func:`register_architecture`); the class must follow the
contract in :mod:`seqjit.models.base`."""
from __future__ import annotations

import importlib

from seqjit.errors import ConfigError

ARCHITECTURES: dict = {
    "transformer": "seqjit.models.transformer:TransformerModel",
    "rnn_seq2seq": "seqjit.models.rnn_seq2seq:RNNSeq2SeqModel",
    "attention_seq2seq": "seqjit.models.attention_seq2seq:AttentionSeq2SeqModel",
}


def register_architecture(name: str, target: str) -> None:
    """Register ``"package.module:Class"`` under ``name``."""
    ARCHITECTURES[name] = target


def model_class(name):
    """The model class of architecture ``name``."""
    try:
        target = ARCHITECTURES[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown architecture {name!r}; known: {', '.join(sorted(ARCHITECTURES))}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


__all__ = ["ARCHITECTURES", "register_architecture", "model_class"]
