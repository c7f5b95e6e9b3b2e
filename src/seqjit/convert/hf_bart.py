"""Import the BART-style families from Hugging Face: BART, mBART, M2M100 (NLLB-200) and Pegasus.

All are the encoder-decoder of :mod:`seqjit.models.transformer` with shared encoder/decoder embeddings;
``transformers`` fixes their differences by ``model_type`` (not by config keys), and so does this
table (:data:`FAMILIES`):

============  =========  ===========  ===================  ==========================================  ===========
model_type    norm       final norms  layernorm_embedding  positions                                   logits bias
============  =========  ===========  ===================  ==========================================  ===========
bart          post-norm  no           yes                  learned, offset 2                           yes
mbart         pre-norm   yes          yes                  learned, offset 2                           yes
m2m_100       pre-norm   yes          no                   sinusoidal (fairseq), offset pad + 1,       no
                                                           counted over non-pad tokens
pegasus       pre-norm   yes          no                   sinusoidal (halves, as Marian)              yes
============  =========  ===========  ===================  ==========================================  ===========

From ``config.json``: sizes, ``activation_function`` (gelu, relu, gelu_new, swish/silu...),
``scale_embedding``, ``max_position_embeddings``, ``tie_word_embeddings`` (False: a separate
``lm_head.weight``, and with ``transformers`` 5 separate encoder and decoder tables), ``pad_token_id``, ``eos_token_id``. Decoding rules from ``generation_config.json``
where present (else ``config.json``), as ``transformers.generate`` takes them: ``decoder_start_token_id``
(else ``bos_token_id``), ``forced_bos_token_id`` (the target language of mBART-50/M2M100/NLLB),
``forced_eos_token_id``. A rule seqjit does not apply (``suppress_tokens``, ``begin_suppress_tokens``,
``forced_decoder_ids``, ``bad_words_ids`` beyond the pad token, several end tokens) or a config that
changes the architecture (``is_decoder``) is a ModelFormatError naming the file and key. A Pegasus file
without ``final_logits_bias`` loads with none (``transformers`` fills zeros).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from seqjit.convert.hf_marian import _ACTIVATIONS
from seqjit.convert.hf_transformer import load_transformer
from seqjit.errors import ModelFormatError


@dataclass(frozen=True)
class Family:
    """What ``transformers``' modeling code of one model_type fixes (see the module table)."""

    norm_first: bool
    final_norms: bool
    layernorm_embedding: bool
    positions: str            # "learned" or "sinusoidal"
    layout: str = "interleaved"
    offset: int | None = 0    # None: pad_id + 1 (fairseq)
    final_logits_bias: bool = True
    scale_embedding: bool = False  # transformers' default when config.json omits it
    activation: str = "gelu"


FAMILIES = {
    "bart": Family(norm_first=False, final_norms=False, layernorm_embedding=True, positions="learned", offset=2),
    "mbart": Family(norm_first=True, final_norms=True, layernorm_embedding=True, positions="learned", offset=2),
    "m2m_100": Family(norm_first=True, final_norms=True, layernorm_embedding=False, positions="sinusoidal",
                      layout="fairseq", offset=None, final_logits_bias=False, scale_embedding=True, activation="relu"),
    "pegasus": Family(norm_first=True, final_norms=True, layernorm_embedding=False, positions="sinusoidal",
                      layout="halves"),
}

GENERATION_CONFIG = "generation_config.json"


class _Reader:
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


def _generation(directory: Path, hf: _Reader) -> _Reader:
    """The decoding rules' source: generation_config.json when present, else config.json."""
    from seqjit.models.files import model_file, read_json

    path = model_file(directory, GENERATION_CONFIG)
    if not path.exists():
        return hf
    return _Reader(read_json(path), str(path))


def _check_rules(gen: _Reader, pad: int) -> None:
    """Refuse the decoding rules seqjit does not apply (it suppresses the pad token itself)."""
    for key in ("suppress_tokens", "begin_suppress_tokens", "forced_decoder_ids", "sequence_bias"):
        if gen.get(key):
            raise ModelFormatError(f"{gen.where}: {key!r} is not supported by seqjit (remove it to decode without it)")
    bad = gen.get("bad_words_ids")
    if bad and bad != [[pad]]:
        raise ModelFormatError(f"{gen.where}: 'bad_words_ids' {repr(bad)[:60]} is not supported (seqjit bans only "
                               f"the pad token {pad})")


def bart_config(model_type: str, hf_dict: dict, directory: Path, dtype: str = "float32") -> dict:
    """The seqjit TransformerConfig dict of a BART-family ``config.json`` (and its generation config)."""
    family = FAMILIES[model_type]
    where = str(directory / "config.json")
    hf = _Reader(hf_dict, where)
    if hf.flag("is_decoder", False):
        raise ModelFormatError(f"{where}: 'is_decoder' true (a decoder-only {model_type}) is not supported")
    activation = hf.get("activation_function", family.activation)
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise ModelFormatError(f"{where}: activation_function {repr(activation)[:60]} is not supported; supported: "
                               f"{sorted(_ACTIVATIONS)}")
    pad = hf.token("pad_token_id", required=True)
    gen = _generation(directory, hf)
    _check_rules(gen, pad)
    eos = gen.token("eos_token_id", hf.token("eos_token_id"))
    start = gen.token("decoder_start_token_id", hf.token("decoder_start_token_id"))
    if start is None:  # transformers starts from the BOS token then (mBART)
        start = gen.token("bos_token_id", hf.token("bos_token_id"))
    for key, value in (("eos_token_id", eos), ("decoder_start_token_id (or bos_token_id)", start)):
        if value is None:
            raise ModelFormatError(f"{where}: missing {key}")
    vocab = hf.get("vocab_size", required=True)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=hf.get("d_model", required=True),
        encoder_layers=hf.get("encoder_layers", required=True), decoder_layers=hf.get("decoder_layers", required=True),
        encoder_heads=hf.get("encoder_attention_heads", required=True),
        decoder_heads=hf.get("decoder_attention_heads", required=True),
        encoder_ffn_dim=hf.get("encoder_ffn_dim", required=True), decoder_ffn_dim=hf.get("decoder_ffn_dim", required=True),
        activation=_ACTIVATIONS[activation], norm_first=family.norm_first, layer_norm_eps=1e-5,
        scale_embedding=hf.flag("scale_embedding", family.scale_embedding), positions=family.positions,
        position_layout=family.layout, max_positions=hf.get("max_position_embeddings", 1024),
        position_offset=pad + 1 if family.offset is None else family.offset,
        padding_positions=family.offset is None, layernorm_embedding=family.layernorm_embedding,
        encoder_final_norm=family.final_norms, decoder_final_norm=family.final_norms, share_embeddings=True,
        tie_output=hf.flag("tie_word_embeddings", True), final_logits_bias=family.final_logits_bias,
        pad_id=pad, eos_id=eos, decoder_start_id=start,
        forced_bos_id=gen.token("forced_bos_token_id", hf.token("forced_bos_token_id")),
        forced_eos_id=gen.token("forced_eos_token_id", hf.token("forced_eos_token_id")),
        dtype=dtype,
    )


def from_hf_bart(directory: Path, hf_config: dict, *, backend=None, dtype: str = "float32",
                 allow_nonfinite: bool = False):
    """A TransformerModel from a BART, mBART, M2M100 or Pegasus directory (see the module docstring)."""
    model_type = hf_config["model_type"]
    config = bart_config(model_type, hf_config, directory, dtype)
    return load_transformer(directory, config, str(directory / "config.json"), backend=backend,
                            allow_nonfinite=allow_nonfinite, optional=("final_logits_bias",), untie=True)
