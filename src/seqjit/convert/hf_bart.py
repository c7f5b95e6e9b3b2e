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
``lm_head.weight``, and with ``transformers`` 5 separate encoder and decoder tables), ``pad_token_id``,
and the decoding keys of :mod:`seqjit.convert.hf_generation` (decoder start, forced BOS/EOS, ...).
``is_decoder`` (a decoder-only model) is a ModelFormatError naming the file and key. A Pegasus file
without ``final_logits_bias`` loads with none (``transformers`` fills zeros).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from seqjit.convert.hf_generation import decoding_rules
from seqjit.convert.hf_loader import load_hf
from seqjit.convert.hf_rules import Reader, activation
from seqjit.convert.hf_transformer import transformer_weights
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


def bart_config(model_type: str, hf_dict: dict, directory: Path, dtype: str = "float32") -> dict:
    """The seqjit TransformerConfig dict of a BART-family ``config.json`` (and its generation config)."""
    family = FAMILIES[model_type]
    where = str(directory / "config.json")
    hf = Reader(hf_dict, where)
    if hf.flag("is_decoder", False):
        raise ModelFormatError(f"{where}: 'is_decoder' true (a decoder-only {model_type}) is not supported")
    act = activation(hf, family.activation)
    pad = hf.token("pad_token_id", required=True)
    rules = decoding_rules(directory, hf)
    vocab = hf.get("vocab_size", required=True)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=hf.get("d_model", required=True),
        encoder_layers=hf.get("encoder_layers", required=True), decoder_layers=hf.get("decoder_layers", required=True),
        encoder_heads=hf.get("encoder_attention_heads", required=True),
        decoder_heads=hf.get("decoder_attention_heads", required=True),
        encoder_ffn_dim=hf.get("encoder_ffn_dim", required=True), decoder_ffn_dim=hf.get("decoder_ffn_dim", required=True),
        activation=act, norm_first=family.norm_first, layer_norm_eps=1e-5,
        scale_embedding=hf.flag("scale_embedding", family.scale_embedding), positions=family.positions,
        position_layout=family.layout, max_positions=hf.get("max_position_embeddings", 1024),
        position_offset=pad + 1 if family.offset is None else family.offset,
        padding_positions=family.offset is None, layernorm_embedding=family.layernorm_embedding,
        encoder_final_norm=family.final_norms, decoder_final_norm=family.final_norms, share_embeddings=True,
        tie_output=hf.flag("tie_word_embeddings", True), final_logits_bias=family.final_logits_bias,
        pad_id=pad, **rules, dtype=dtype,
    )


def build_bart(directory: Path, hf_config: dict, raw: dict, dtype: str) -> tuple:
    """The family function of :mod:`seqjit.convert.hf_loader` for BART, mBART, M2M100 and Pegasus."""
    where = str(directory / "config.json")
    return transformer_weights(raw, bart_config(hf_config["model_type"], hf_config, directory, dtype), where,
                               str(directory / "model.safetensors"), optional=("final_logits_bias",), untie=True)


def from_hf_bart(directory: Path, hf_config: dict, **options):
    """A TransformerModel from a BART, mBART, M2M100 or Pegasus directory (see the module docstring;
    ``options``: :func:`~seqjit.convert.hf_loader.load_hf`'s)."""
    return load_hf(build_bart, directory, hf_config, **options)
