"""Reading a Hugging Face ``config.json`` for the importers: typed look-ups whose errors name the file
and key, and the activation names. The decoding keys (``generation_config.json``): :mod:`seqjit.convert.hf_generation`.
"""
from __future__ import annotations

from seqjit.errors import ModelFormatError

#: Hugging Face ``activation_function`` names -> seqjit activations
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_fast": "gelu_tanh", "swish": "silu", "silu": "silu"}


class Reader:
    """Typed look-ups in one JSON object, errors naming the file and key."""

    def __init__(self, data: dict, where: str):
        self.data, self.where = data, where

    def get(self, key, default=None, required=False):
        value = self.data.get(key)
        if value is None:
            if required:
                raise ModelFormatError(f"{self.where}: missing {key!r}")
            return default
        return value

    def flag(self, key, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise ModelFormatError(f"{self.where}: {key!r} must be true or false, got {repr(value)[:60]}")
        return value

    def token(self, key, default=None, required=False):
        """A token id; a list of one id is that id; a list of several is refused (seqjit has one)."""
        value = self.get(key, default, required)
        if isinstance(value, list):
            if len(set(value)) > 1:
                raise ModelFormatError(f"{self.where}: {key!r} lists several tokens {repr(value)[:60]}; seqjit "
                                       "supports one")
            value = value[0] if value else default
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ModelFormatError(f"{self.where}: {key!r} must be a token id, got {repr(value)[:60]}")
        return value


def activation(hf: Reader, default: str) -> str:
    """The seqjit activation of ``activation_function`` (``default`` when absent)."""
    name = hf.get("activation_function", default)
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise ModelFormatError(f"{hf.where}: activation_function {repr(name)[:60]} is not supported; supported: "
                               f"{sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]
