"""Import a Hugging Face T5 / mT5 / Flan-T5 directory as a seqjit Transformer.

T5Config -> :class:`~seqjit.models.transformer.TransformerConfig`: pre-norm with RMS norms
(``layer_norm_epsilon``) and final norms on both sides, no embedding scale, no absolute positions but
``relative_attention_num_buckets`` / ``relative_attention_max_distance`` bucketed biases (one table per
side, in block 0, shared by every layer; none in cross-attention), no 1/sqrt(d) in attention, inner
attention size ``num_heads * d_kv``, projections without biases, ``feed_forward_proj`` "relu" /
"gelu" / "gated-gelu" (gelu_new, as ``transformers``) / "gated-silu"...: ``fc2(act(wi_0 x) * wi_1 x)``
when gated. The output projection: ``lm_head.weight`` when the file holds one that differs from
``shared.weight`` (T5 v1.1, mT5 and Flan-T5 checkpoints), else the shared table; the decoder output is
rescaled by ``d_model ** -0.5`` when ``scale_decoder_outputs`` (``transformers`` 5) or, without that
key, unless ``tie_word_embeddings`` is false (the original T5 rule). Decoding rules: as the BART
families (:mod:`seqjit.convert.hf_generation`); T5 starts from the pad token (``decoder_start_token_id``).

Weight names: ``{encoder,decoder}.block.{i}.layer.{j}...`` mapped by :func:`t5_name`; the tied copies
``{encoder,decoder}.embed_tokens.weight`` must equal ``shared.weight``. ``umt5`` (a relative bias in
every layer) and ``is_decoder`` configs are refused.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from seqjit.convert.hf_generation import decoding_rules
from seqjit.convert.hf_loader import load_hf
from seqjit.convert.hf_rules import ACTIVATIONS, Reader
from seqjit.errors import ModelFormatError

_ATTENTION = {"self_attn": (0, "SelfAttention"), "encoder_attn": (1, "EncDecAttention")}
_PROJ = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "out_proj": "o"}
_LAYER = re.compile(r"(encoder|decoder)\.layers\.(\d+)\.(.+)")


def t5_name(name: str, gated: bool) -> str:
    """The T5 checkpoint name of the seqjit weight ``name``."""
    if name in ("shared.weight", "lm_head.weight"):
        return name
    side, rest = name.split(".", 1)
    if rest == "relative_attention_bias.weight":
        return f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    if rest == "layer_norm.weight":
        return f"{side}.final_layer_norm.weight"
    side, i, rest = _LAYER.fullmatch(name).groups()
    ff = 1 if side == "encoder" else 2
    block = f"{side}.block.{i}.layer"
    part, _, leaf = rest.partition(".")
    if part in _ATTENTION:
        j, module = _ATTENTION[part]
        return f"{block}.{j}.{module}.{_PROJ[leaf.split('.')[0]]}.weight"
    if part.endswith("_layer_norm"):
        j = {"self_attn_layer_norm": 0, "encoder_attn_layer_norm": 1, "final_layer_norm": ff}[part]
        return f"{block}.{j}.layer_norm.weight"
    dense = {"fc1": "wi_0" if gated else "wi", "fc1_gate": "wi_1", "fc2": "wo"}[part]
    return f"{block}.{ff}.DenseReluDense.{dense}.weight"


def _activation(hf: Reader) -> tuple:
    """(seqjit activation, gated) from ``feed_forward_proj`` as ``T5Config`` reads it."""
    proj = hf.get("feed_forward_proj", "relu")
    parts = proj.split("-") if isinstance(proj, str) else []
    if not parts or len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
        raise ModelFormatError(f"{hf.where}: feed_forward_proj {repr(proj)[:60]} is not supported")
    act = "gelu_new" if proj == "gated-gelu" else parts[-1]
    if act not in ACTIVATIONS:
        raise ModelFormatError(f"{hf.where}: feed_forward_proj {proj!r}: activation {act!r} is not supported; "
                               f"supported: {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[act], len(parts) == 2


def t5_config(hf_dict: dict, directory: Path, untied: bool, dtype: str = "float32") -> dict:
    """The seqjit TransformerConfig dict of a T5 ``config.json``; ``untied``: the file has its own lm_head."""
    where = str(directory / "config.json")
    hf = Reader(hf_dict, where)
    if hf.flag("is_decoder", False):
        raise ModelFormatError(f"{where}: 'is_decoder' true (a decoder-only T5) is not supported")
    activation, gated = _activation(hf)
    pad = hf.token("pad_token_id", 0)
    scale = hf.data.get("scale_decoder_outputs")
    if scale is None:
        scale = hf.data.get("tie_word_embeddings") is not False
    if not isinstance(scale, bool):
        raise ModelFormatError(f"{where}: 'scale_decoder_outputs' must be true or false, got {repr(scale)[:60]}")
    d_model, layers, heads = hf.get("d_model", required=True), hf.get("num_layers", required=True), hf.get("num_heads", required=True)
    vocab, ffn = hf.get("vocab_size", required=True), hf.get("d_ff", required=True)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, encoder_layers=layers,
        decoder_layers=hf.get("num_decoder_layers", layers), encoder_heads=heads, decoder_heads=heads,
        encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, activation=activation, norm_first=True, norm="rms",
        layer_norm_eps=hf.get("layer_norm_epsilon", 1e-6), head_dim=hf.get("d_kv", required=True),
        projection_bias=False, attention_scale=False, ffn_gated=gated, positions="relative",
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128),
        output_scale=float(d_model) ** -0.5 if scale else 1.0, encoder_final_norm=True, decoder_final_norm=True,
        share_embeddings=True, tie_output=not untied, pad_id=pad, **decoding_rules(directory, hf), dtype=dtype,
    )


def build_t5(directory: Path, hf_config: dict, raw: dict, dtype: str) -> tuple:
    """The family function of :mod:`seqjit.convert.hf_loader` for T5 and mT5."""
    from seqjit.models.transformer import TransformerConfig, TransformerModel

    where = str(directory / "config.json")
    source = str(directory / "model.safetensors")
    shared = raw.get("shared.weight")
    head = raw.get("lm_head.weight")
    untied = head is not None and not (shared is not None and head.shape == shared.shape and np.array_equal(head, shared))
    cfg = TransformerConfig.from_dict(t5_config(hf_config, directory, untied, dtype), where=where)
    weights, used = {}, set()
    for name in TransformerModel.weight_spec(cfg):
        hf = t5_name(name, cfg.ffn_gated)
        if hf in raw:
            weights[name] = raw[hf]
            used.add(hf)
    copies = ["encoder.embed_tokens.weight", "decoder.embed_tokens.weight"] + ([] if untied else ["lm_head.weight"])
    for copy in copies:
        if copy in raw:
            if shared is not None and not np.array_equal(raw[copy], shared):
                raise ModelFormatError(f"{source}: {copy} differs from 'shared.weight' although T5 ties them")
            used.add(copy)
    used.add("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight")  # transformers ignores it too
    return cfg, weights, used


def from_hf_t5(directory: Path, hf_config: dict, **options):
    """A TransformerModel from a T5/mT5 directory (``options``: :func:`~seqjit.convert.hf_loader.load_hf`'s)."""
    if hf_config.get("model_type") == "umt5":
        raise ModelFormatError(f"{directory / 'config.json'}: model_type 'umt5' (a relative position bias in every "
                               "layer) is not supported")
    return load_hf(build_t5, directory, hf_config, **options)
