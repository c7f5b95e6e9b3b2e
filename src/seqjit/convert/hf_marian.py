"""Import a Hugging Face MarianMT directory (``config.json`` + ``model.safetensors``).

MarianConfig -> :class:`~seqjit.models.transformer.TransformerConfig`: ``d_model``, layers,
heads and FFN sizes per side, ``activation_function`` (relu, gelu, gelu_new -> gelu_tanh, swish ->
silu), ``scale_embedding``, ``normalize_before`` (pre-norm; absent in Marian: post-norm), sinusoidal
positions in the "halves" layout (sin in the first half, cos in the second) up to
``max_position_embeddings`` (a table the file stores is used: :mod:`seqjit.convert.hf_transformer`),
``pad_token_id``, ``final_logits_bias``, shared encoder/decoder embeddings
(``share_encoder_decoder_embeddings``) and the output projection tied to the decoder embedding
(``tie_word_embeddings``). Marian has no final layer norms and no embedding layer norm. Decoding keys
(end and start tokens, forced end token, suppression rules, ...): :mod:`seqjit.convert.hf_generation`,
as every family.

Weights: :func:`seqjit.convert.hf_transformer.transformer_weights` (the names every BART-style family
shares), loaded by :func:`seqjit.convert.hf_loader.load_hf`.
"""
from __future__ import annotations

from pathlib import Path

from seqjit.convert.hf_generation import decoding_rules
from seqjit.convert.hf_loader import load_hf
from seqjit.convert.hf_rules import Reader, activation
from seqjit.convert.hf_transformer import transformer_weights

#: MarianConfig's defaults for a config.json without them (its start token: seqjit takes the pad token)
MARIAN_DEFAULTS = dict(eos_token_id=0)


def marian_config(hf_dict: dict, where: str, dtype: str = "float32", directory: Path | None = None) -> dict:
    """The seqjit TransformerConfig dict for a MarianConfig dict (decoding keys from ``directory``'s
    generation config when given, else from the dict)."""
    hf = Reader(hf_dict, where)
    vocab = hf.get("vocab_size", required=True)
    share = hf.flag("share_encoder_decoder_embeddings", True)
    tgt_vocab = vocab if share else (hf.get("decoder_vocab_size") or vocab)
    pad = hf.token("pad_token_id", required=True)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=tgt_vocab, d_model=hf.get("d_model", required=True),
        encoder_layers=hf.get("encoder_layers", required=True), decoder_layers=hf.get("decoder_layers", required=True),
        encoder_heads=hf.get("encoder_attention_heads", required=True),
        decoder_heads=hf.get("decoder_attention_heads", required=True),
        encoder_ffn_dim=hf.get("encoder_ffn_dim", required=True), decoder_ffn_dim=hf.get("decoder_ffn_dim", required=True),
        activation=activation(hf, "gelu"), norm_first=hf.flag("normalize_before", False), layer_norm_eps=1e-5,
        scale_embedding=hf.flag("scale_embedding", False), positions="sinusoidal", position_layout="halves",
        max_positions=hf.get("max_position_embeddings", 1024), share_embeddings=share,
        tie_output=hf.flag("tie_word_embeddings", True), final_logits_bias=True, pad_id=pad,
        **decoding_rules(directory, hf, MARIAN_DEFAULTS | dict(decoder_start_token_id=pad)), dtype=dtype,
    )


def build_marian(directory: Path, hf_config: dict, raw: dict, dtype: str) -> tuple:
    """The family function of :mod:`seqjit.convert.hf_loader`."""
    where = str(directory / "config.json")
    return transformer_weights(raw, marian_config(hf_config, where, dtype, directory), where,
                               str(directory / "model.safetensors"))


def from_hf_marian(directory: Path, hf_config: dict, **options):
    """A TransformerModel from a MarianMT directory (``options``: :func:`~seqjit.convert.hf_loader.load_hf`'s)."""
    return load_hf(build_marian, directory, hf_config, **options)
