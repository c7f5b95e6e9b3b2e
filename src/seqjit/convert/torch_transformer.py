"""Import an ``nn.Transformer`` wrapped with token embeddings, positions and an output projection.

Expected ``state_dict`` names (E = d_model; ``transformer.`` is the ``nn.Transformer`` attribute,
detected automatically when the dict holds a bare ``nn.Transformer``'s names with no prefix)::

    src_embed.weight [Vs, E], tgt_embed.weight [Vt, E]     token embeddings, or one
    embed.weight [V, E]                                     shared by encoder and decoder
    src_pos_embed.weight, tgt_pos_embed.weight [P, E]       only with positions="learned"
    src_embed_norm.{weight,bias}, tgt_embed_norm.*          optional layer norm after embedding
    transformer.encoder.layers.{i}.self_attn.in_proj_weight [3E, E], .in_proj_bias [3E]
    transformer.encoder.layers.{i}.self_attn.out_proj.{weight,bias}
    transformer.encoder.layers.{i}.linear1.*, .linear2.*, .norm1.*, .norm2.*
    transformer.encoder.norm.*                              optional final norm
    transformer.decoder.layers.{i}.self_attn.*, .multihead_attn.* (cross-attention),
        .linear1.*, .linear2.*, .norm1.*, .norm2.*, .norm3.*
    transformer.decoder.norm.*                              optional final norm
    generator.weight [Vt, E]                                output projection (absent: tied to
                                                            the target embedding)
    generator.bias [Vt]                                     optional (becomes final_logits_bias)

Keyword arguments give what the weights do not say: ``nhead`` (or ``encoder_heads`` and
``decoder_heads``), ``activation`` ("relu", "gelu", ...), ``norm_first``, ``layer_norm_eps``,
``scale_embedding``, ``positions`` / ``position_layout`` / ``max_positions`` /
``position_offset``, ``pad_id`` / ``decoder_start_id`` / ``eos_id``, ``dtype``; and
``ignore``: names (or prefixes ending in ".") of entries to skip, e.g. a sinusoidal buffer.
Sizes, layer counts, sharing, tying and the optional norms are read from the weights.
"""
from __future__ import annotations

import re

import numpy as np

from seqjit.convert.common import cast_floats, unused_error
from seqjit.errors import ConfigError, ModelFormatError

_SOURCE = "from_torch(arch='transformer')"
_ENC_NORMS = {"norm1": "self_attn_layer_norm", "norm2": "final_layer_norm"}
_DEC_NORMS = {"norm1": "self_attn_layer_norm", "norm2": "encoder_attn_layer_norm", "norm3": "final_layer_norm"}


def _count_layers(sd: dict, prefix: str) -> int:
    found = {int(m.group(1)) for k in sd for m in [re.match(re.escape(prefix) + r"(\d+)\.", k)] if m}
    if found and found != set(range(len(found))):
        raise ModelFormatError(f"{_SOURCE}: layers under {prefix!r} are not numbered 0..n-1: {sorted(found)}")
    return len(found)


def from_torch_transformer(state_dict: dict, *, backend=None, ignore=(), nhead=None, **config):
    from seqjit.models.transformer import TransformerConfig, TransformerModel

    sd = {k: v for k, v in state_dict.items() if not any(k == i or (i.endswith(".") and k.startswith(i)) for i in ignore)}
    prefix = "transformer."
    if not any(k.startswith(prefix) for k in sd) and any(k.startswith("encoder.layers.") for k in sd):
        prefix = ""
    used: set = set()

    def take(name):
        if name not in sd:
            raise ModelFormatError(f"{_SOURCE}: state_dict has no {name!r}")
        used.add(name)
        return sd[name]

    out: dict = {}
    shared = "embed.weight" in sd
    if shared:
        out["shared.weight"] = take("embed.weight")
    else:
        out["encoder.embed_tokens.weight"] = take("src_embed.weight")
        out["decoder.embed_tokens.weight"] = take("tgt_embed.weight")
    tgt_table = out["shared.weight" if shared else "decoder.embed_tokens.weight"]
    d_model = tgt_table.shape[1]
    for side, tag in (("encoder", "src"), ("decoder", "tgt")):
        if f"{tag}_pos_embed.weight" in sd:
            out[f"{side}.embed_positions.weight"] = take(f"{tag}_pos_embed.weight")
        if f"{tag}_embed_norm.weight" in sd:
            for p in ("weight", "bias"):
                out[f"{side}.layernorm_embedding.{p}"] = take(f"{tag}_embed_norm.{p}")

    layers = {}
    for side, norms in (("encoder", _ENC_NORMS), ("decoder", _DEC_NORMS)):
        n = layers[side] = _count_layers(sd, f"{prefix}{side}.layers.")
        if n == 0:
            raise ModelFormatError(f"{_SOURCE}: state_dict has no {prefix}{side}.layers.0.* entries")
        for i in range(n):
            src, dst = f"{prefix}{side}.layers.{i}", f"{side}.layers.{i}"
            attns = [("self_attn", "self_attn")] + ([("multihead_attn", "encoder_attn")] if side == "decoder" else [])
            for torch_name, name in attns:
                w, b = take(f"{src}.{torch_name}.in_proj_weight"), take(f"{src}.{torch_name}.in_proj_bias")
                for k, proj in enumerate(("q", "k", "v")):
                    out[f"{dst}.{name}.{proj}_proj.weight"] = w[k * d_model:(k + 1) * d_model]
                    out[f"{dst}.{name}.{proj}_proj.bias"] = b[k * d_model:(k + 1) * d_model]
                for p in ("weight", "bias"):
                    out[f"{dst}.{name}.out_proj.{p}"] = take(f"{src}.{torch_name}.out_proj.{p}")
            for p in ("weight", "bias"):
                out[f"{dst}.fc1.{p}"] = take(f"{src}.linear1.{p}")
                out[f"{dst}.fc2.{p}"] = take(f"{src}.linear2.{p}")
                for torch_norm, norm in norms.items():
                    out[f"{dst}.{norm}.{p}"] = take(f"{src}.{torch_norm}.{p}")
        if f"{prefix}{side}.norm.weight" in sd:
            for p in ("weight", "bias"):
                out[f"{side}.layer_norm.{p}"] = take(f"{prefix}{side}.norm.{p}")
    tie = "generator.weight" not in sd
    if not tie:
        out["lm_head.weight"] = take("generator.weight")
    if "generator.bias" in sd:
        out["final_logits_bias"] = take("generator.bias")
    unused = set(sd) - used
    if unused:
        raise unused_error(_SOURCE, unused)

    if nhead is not None:
        config.setdefault("encoder_heads", nhead)
        config.setdefault("decoder_heads", nhead)
    for key in ("encoder_heads", "decoder_heads"):
        if key not in config:
            raise ConfigError(f"{_SOURCE}: pass nhead= (or encoder_heads= and decoder_heads=): the heads are not in the weights")
    if config.get("positions") == "learned" and "encoder.embed_positions.weight" in out:
        config.setdefault("max_positions", out["encoder.embed_positions.weight"].shape[0] - config.get("position_offset", 0))
    inferred = dict(
        src_vocab_size=(out["shared.weight"] if shared else out["encoder.embed_tokens.weight"]).shape[0],
        tgt_vocab_size=tgt_table.shape[0], d_model=d_model,
        encoder_layers=layers["encoder"], decoder_layers=layers["decoder"],
        encoder_ffn_dim=out["encoder.layers.0.fc1.weight"].shape[0],
        decoder_ffn_dim=out["decoder.layers.0.fc1.weight"].shape[0],
        share_embeddings=shared, tie_output=tie, final_logits_bias="final_logits_bias" in out,
        encoder_final_norm="encoder.layer_norm.weight" in out, decoder_final_norm="decoder.layer_norm.weight" in out,
        layernorm_embedding="encoder.layernorm_embedding.weight" in out,
    )
    clash = sorted(k for k in inferred if k in config and config[k] != inferred[k])
    if clash:
        raise ConfigError(f"{_SOURCE}: {', '.join(f'{k}={config[k]!r}' for k in clash)} contradict(s) the weights "
                          f"({', '.join(f'{k}={inferred[k]!r}' for k in clash)})")
    cfg = TransformerConfig.from_dict({**inferred, **config}, where=_SOURCE)
    weights = cast_floats({k: np.asarray(v) for k, v in out.items()}, cfg.dtype)
    return TransformerModel(cfg, weights, backend=backend, source=_SOURCE)
