"""Import a Hugging Face MarianMT directory (``config.json`` + ``model.safetensors``).

MarianConfig -> :class:`~seqjit.models.transformer.TransformerConfig`: ``d_model``, layers,
heads and FFN sizes per side, ``activation_function`` (relu, gelu, gelu_new -> gelu_tanh, swish ->
silu), ``scale_embedding``, ``normalize_before`` (pre-norm; absent in Marian: post-norm), static
sinusoidal positions in the "halves" layout (sin in the first half, cos in the second) up to
``max_position_embeddings``, ``pad_token_id`` / ``eos_token_id`` / ``decoder_start_token_id``,
``final_logits_bias``, shared encoder/decoder embeddings
(``share_encoder_decoder_embeddings``) and the output projection tied to the decoder embedding
(``tie_word_embeddings``). Marian has no final layer norms and no embedding layer norm.

Weights: :func:`seqjit.convert.hf_transformer.load_transformer` (the names every BART-style family
shares).
"""
from __future__ import annotations

from pathlib import Path

from seqjit.convert.hf_rules import ACTIVATIONS
from seqjit.convert.hf_transformer import load_transformer
from seqjit.errors import ModelFormatError


def _first(value):
    return value[0] if isinstance(value, (list, tuple)) and value else value


def marian_config(hf: dict, where: str, dtype: str = "float32") -> dict:
    """The seqjit TransformerConfig dict for a MarianConfig dict."""
    def get(key, default=None, required=False):
        if key not in hf or hf[key] is None:
            if required:
                raise ModelFormatError(f"{where}: missing {key!r}")
            return default
        return hf[key]

    def flag(key, default):
        value = get(key, default)
        if not isinstance(value, bool):
            raise ModelFormatError(f"{where}: {key!r} must be true or false, got {repr(value)[:60]}")
        return value

    activation = get("activation_function", "gelu")
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ModelFormatError(f"{where}: activation_function {repr(activation)[:60]} is not supported; supported: "
                               f"{sorted(ACTIVATIONS)}")
    vocab = get("vocab_size", required=True)
    share = flag("share_encoder_decoder_embeddings", True)
    tgt_vocab = vocab if share else (get("decoder_vocab_size") or vocab)
    pad = get("pad_token_id", required=True)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=tgt_vocab, d_model=get("d_model", required=True),
        encoder_layers=get("encoder_layers", required=True), decoder_layers=get("decoder_layers", required=True),
        encoder_heads=get("encoder_attention_heads", required=True), decoder_heads=get("decoder_attention_heads", required=True),
        encoder_ffn_dim=get("encoder_ffn_dim", required=True), decoder_ffn_dim=get("decoder_ffn_dim", required=True),
        activation=ACTIVATIONS[activation], norm_first=flag("normalize_before", False), layer_norm_eps=1e-5,
        scale_embedding=flag("scale_embedding", False), positions="sinusoidal", position_layout="halves",
        max_positions=get("max_position_embeddings", 1024), share_embeddings=share,
        tie_output=flag("tie_word_embeddings", True), final_logits_bias=True,
        pad_id=pad, eos_id=_first(get("eos_token_id", 0)), decoder_start_id=get("decoder_start_token_id", pad),
        dtype=dtype,
    )


def from_hf_marian(directory: Path, hf_config: dict, *, backend=None, dtype: str = "float32",
                   allow_nonfinite: bool = False):
    where = str(directory / "config.json")
    return load_transformer(directory, marian_config(hf_config, where, dtype), where, backend=backend,
                            allow_nonfinite=allow_nonfinite)
