"""Import a Hugging Face MarianMT directory (``config.json`` + ``model.safetensors``).

MarianConfig -> :class:`~seqjit.models.transformer.TransformerConfig`: ``d_model``, layers,
heads and FFN sizes per side, ``activation_function`` (relu, gelu, gelu_new -> gelu_tanh, swish ->
silu), ``scale_embedding``, ``normalize_before`` (pre-norm; absent in Marian: post-norm), static
sinusoidal positions in the "halves" layout (sin in the first half, cos in the second) up to
``max_position_embeddings``, ``pad_token_id`` / ``eos_token_id`` / ``decoder_start_token_id``,
``final_logits_bias``, shared encoder/decoder embeddings
(``share_encoder_decoder_embeddings``) and the output projection tied to the decoder embedding
(``tie_word_embeddings``). Marian has no final layer norms and no embedding layer norm.

Weight names are the seqjit names with a ``model.`` prefix; tied copies a file may also hold
(``model.encoder.embed_tokens.weight``, ``lm_head.weight``...) are checked equal to the shared
table, and the sinusoidal ``embed_positions`` tables are recomputed, not read.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from seqjit.convert.common import cast_floats, read_hf_weights, unused_error
from seqjit.errors import ModelFormatError

_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                "gelu_fast": "gelu_tanh", "swish": "silu", "silu": "silu"}


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
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise ModelFormatError(f"{where}: activation_function {repr(activation)[:60]} is not supported; supported: "
                               f"{sorted(_ACTIVATIONS)}")
    vocab = get("vocab_size", required=True)
    share = flag("share_encoder_decoder_embeddings", True)
    tgt_vocab = vocab if share else (get("decoder_vocab_size") or vocab)
    pad = get("pad_token_id", required=True)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=tgt_vocab, d_model=get("d_model", required=True),
        encoder_layers=get("encoder_layers", required=True), decoder_layers=get("decoder_layers", required=True),
        encoder_heads=get("encoder_attention_heads", required=True), decoder_heads=get("decoder_attention_heads", required=True),
        encoder_ffn_dim=get("encoder_ffn_dim", required=True), decoder_ffn_dim=get("decoder_ffn_dim", required=True),
        activation=_ACTIVATIONS[activation], norm_first=flag("normalize_before", False), layer_norm_eps=1e-5,
        scale_embedding=flag("scale_embedding", False), positions="sinusoidal", position_layout="halves",
        max_positions=get("max_position_embeddings", 1024), share_embeddings=share,
        tie_output=flag("tie_word_embeddings", True), final_logits_bias=True,
        pad_id=pad, eos_id=_first(get("eos_token_id", 0)), decoder_start_id=get("decoder_start_token_id", pad),
        dtype=dtype,
    )


def from_hf_marian(directory: Path, hf_config: dict, *, backend=None, dtype: str = "float32",
                   allow_nonfinite: bool = False):
    from seqjit.models.transformer import TransformerConfig, TransformerModel

    where = str(directory / "config.json")
    cfg = TransformerConfig.from_dict(marian_config(hf_config, where, dtype), where=where)
    source = str(directory / "model.safetensors")
    raw = read_hf_weights(directory, allow_nonfinite=allow_nonfinite)
    spec = TransformerModel.weight_spec(cfg)
    used: set = set()
    weights: dict = {}
    for name in spec:
        hf_name = name if name == "final_logits_bias" else f"model.{name}"
        if name == "lm_head.weight":
            hf_name = "lm_head.weight"
        if hf_name in raw:
            weights[name] = raw[hf_name]
            used.add(hf_name)
    if "final_logits_bias" in weights:
        weights["final_logits_bias"] = weights["final_logits_bias"].reshape(-1)
    if cfg.share_embeddings and "shared.weight" not in weights:
        for alt in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
            if alt in raw:
                weights["shared.weight"] = raw[alt]
                break
    tied = "shared.weight" if cfg.share_embeddings else "decoder.embed_tokens.weight"
    copies = ["lm_head.weight"] if cfg.tie_output else []
    if cfg.share_embeddings:
        copies += ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
    for copy in copies:
        if copy in raw:
            if tied in weights and not np.array_equal(raw[copy], weights[tied]):
                raise ModelFormatError(f"{source}: {copy} differs from {tied!r} although the config ties them")
            used.add(copy)
    used.update(k for k in raw if k.endswith("embed_positions.weight"))
    unused = set(raw) - used
    if unused:
        raise unused_error(source, unused)
    return TransformerModel(cfg, cast_floats(weights, cfg.dtype), backend=backend, source=source)
