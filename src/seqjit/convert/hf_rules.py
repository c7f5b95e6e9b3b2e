"""Reading a Hugging Face ``config.json`` / ``generation_config.json`` for the importers: typed look-ups
whose errors name the file and key, the activation names, and the decoding rules
``transformers.generate`` takes from them.

Decoding rules come from ``generation_config.json`` where present (else ``config.json``), key by key
falling back to ``config.json``: ``eos_token_id``, ``decoder_start_token_id`` (else ``bos_token_id``,
as ``transformers`` starts an mBART decoder), ``forced_bos_token_id`` (the target language of
mBART-50/M2M100/NLLB) and ``forced_eos_token_id``; ``suppress_tokens``, ``begin_suppress_tokens`` and
``bad_words_ids`` become the model's defaults of the decoding options of those names. A rule seqjit
does not apply (``forced_decoder_ids``, ``sequence_bias``, several end tokens) is a ModelFormatError,
never silently dropped.
"""
from __future__ import annotations

from pathlib import Path

from seqjit.errors import ModelFormatError

GENERATION_CONFIG = "generation_config.json"
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


def generation_reader(directory: Path, hf: Reader) -> Reader:
    """The decoding rules' source: generation_config.json when present, else config.json."""
    from seqjit.models.files import model_file, read_json

    path = model_file(directory, GENERATION_CONFIG)
    if not path.exists():
        return hf
    return Reader(read_json(path), str(path))


def _check_rules(gen: Reader) -> None:
    for key in ("forced_decoder_ids", "sequence_bias"):
        if gen.get(key):
            raise ModelFormatError(f"{gen.where}: {key!r} is not supported by seqjit (remove it to decode without it)")


def _token_list(gen: Reader, key: str):
    """A list of token ids (None when absent or empty)."""
    value = gen.get(key)
    if value is None or value == []:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        raise ModelFormatError(f"{gen.where}: {key!r} must be a list of token ids, got {repr(value)[:60]}")
    return value


def suppression_rules(gen: Reader) -> dict:
    """``suppress_tokens``, ``begin_suppress_tokens`` and ``bad_words_ids`` of the generation config
    (the defaults of the decoding options of those names)."""
    words = gen.get("bad_words_ids")
    if words is not None and (not isinstance(words, list) or not all(
            isinstance(w, list) and w and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in w)
            for w in words)):
        raise ModelFormatError(f"{gen.where}: 'bad_words_ids' must be a list of token-id lists, got {repr(words)[:60]}")
    return dict(suppress_tokens=_token_list(gen, "suppress_tokens"),
                begin_suppress_tokens=_token_list(gen, "begin_suppress_tokens"), bad_words_ids=words or None)


def decoding_rules(directory: Path, hf: Reader, pad: int) -> dict:
    """``eos_id``, ``decoder_start_id``, ``forced_bos_id``, ``forced_eos_id`` and the suppression rules
    (:func:`suppression_rules`) for the seqjit config."""
    gen = generation_reader(directory, hf)
    _check_rules(gen)
    eos = gen.token("eos_token_id", hf.token("eos_token_id"))
    start = gen.token("decoder_start_token_id", hf.token("decoder_start_token_id"))
    if start is None:  # transformers starts from the BOS token then (mBART)
        start = gen.token("bos_token_id", hf.token("bos_token_id"))
    for key, value in (("eos_token_id", eos), ("decoder_start_token_id (or bos_token_id)", start)):
        if value is None:
            raise ModelFormatError(f"{hf.where}: missing {key}")
    return dict(eos_id=eos, decoder_start_id=start,
                forced_bos_id=gen.token("forced_bos_token_id", hf.token("forced_bos_token_id")),
                forced_eos_id=gen.token("forced_eos_token_id", hf.token("forced_eos_token_id")), **suppression_rules(gen))
