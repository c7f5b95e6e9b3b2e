"""Import a JoeyNMT Transformer (``TransformerEncoder`` + ``TransformerDecoder``) as seqjit's
``transformer`` model; :func:`seqjit.convert.from_joeynmt` calls :func:`from_joeynmt_transformer`
when the config's encoder and decoder are of ``type: transformer``.

JoeyNMT's layers (``transformer_layers.py``): pre-norm (``layer_norm: pre``, every residual branch
reads a LayerNorm of its input; the encoder and decoder end with one more LayerNorm) or post-norm
(``post``, no final norms), LayerNorm eps 1e-6, attention with biased q/k/v/output projections and
1/sqrt(head size) scaling, a ReLU feed-forward, sinusoidal positions ``pe[:, 0::2] = sin``,
``pe[:, 1::2] = cos`` added to the embeddings (times sqrt(dim) when ``embeddings.scale``), and an
output projection without bias. Name map (L: layer)::

    src_embed.lut.weight, trg_embed.lut.weight     -> encoder/decoder.embed_tokens.weight (x sqrt(E) if scale)
    {encoder,decoder}.layers.L.{src_src_att,trg_trg_att}.{q,k,v,output}_layer.* -> ...self_attn.{q,k,v,out}_proj.*
    decoder.layers.L.src_trg_att.*                 -> decoder.layers.L.encoder_attn.*
    encoder.layers.L.layer_norm / decoder.layers.L.x_layer_norm -> ...self_attn_layer_norm
    decoder.layers.L.dec_layer_norm                -> decoder.layers.L.encoder_attn_layer_norm
    *.layers.L.feed_forward.layer_norm             -> ...final_layer_norm
    *.layers.L.feed_forward.pwff_layer.{0,3}       -> ...fc1, fc2
    {encoder,decoder}.layer_norm                   -> {encoder,decoder}.layer_norm (pre-norm)
    decoder.output_layer.weight                    -> lm_head.weight
    {encoder,decoder}.pe.pe [1, 5000, E]           -> {encoder,decoder}.embed_positions.weight: the sinusoid
                                                      table JoeyNMT computed in float32 (its rounding: a
                                                      sinusoid recomputed in float64 differs by ~1e-7, which
                                                      post-norm layers amplify to ~1e-4 in the logits);
                                                      absent: seqjit's sinusoid (``positions="sinusoidal"``)

Decoding rules recorded in the config: JoeyNMT's Transformer searches ban ``<s>`` (not the pad
token: ``suppress_pad_token`` false) and end no output at step 0 (give ``min_length=1``).
"""
from __future__ import annotations

import math
import re

import numpy as np

from seqjit.errors import ConfigError, ModelFormatError

_KNOWN_SIDE = {"type", "num_layers", "num_heads", "hidden_size", "ff_size", "dropout", "emb_dropout", "layer_norm",
               "embeddings", "freeze", "alpha", "activation"}
_RENAME = [(r"^(encoder|decoder)\.layers\.(\d+)\.(?:src_src_att|trg_trg_att)\.([qkv])_layer\.", r"\1.layers.\2.self_attn.\3_proj."),
           (r"^(encoder|decoder)\.layers\.(\d+)\.(?:src_src_att|trg_trg_att)\.output_layer\.", r"\1.layers.\2.self_attn.out_proj."),
           (r"^decoder\.layers\.(\d+)\.src_trg_att\.([qkv])_layer\.", r"decoder.layers.\1.encoder_attn.\2_proj."),
           (r"^decoder\.layers\.(\d+)\.src_trg_att\.output_layer\.", r"decoder.layers.\1.encoder_attn.out_proj."),
           (r"^encoder\.layers\.(\d+)\.layer_norm\.", r"encoder.layers.\1.self_attn_layer_norm."),
           (r"^decoder\.layers\.(\d+)\.x_layer_norm\.", r"decoder.layers.\1.self_attn_layer_norm."),
           (r"^decoder\.layers\.(\d+)\.dec_layer_norm\.", r"decoder.layers.\1.encoder_attn_layer_norm."),
           (r"^(encoder|decoder)\.layers\.(\d+)\.feed_forward\.layer_norm\.", r"\1.layers.\2.final_layer_norm."),
           (r"^(encoder|decoder)\.layers\.(\d+)\.feed_forward\.pwff_layer\.0\.", r"\1.layers.\2.fc1."),
           (r"^(encoder|decoder)\.layers\.(\d+)\.feed_forward\.pwff_layer\.3\.", r"\1.layers.\2.fc2."),
           (r"^decoder\.output_layer\.weight$", "lm_head.weight")]


def _side(cfg: dict, side: str) -> dict:
    part = cfg[side]
    unknown = sorted(set(part) - _KNOWN_SIDE)
    if unknown:
        raise ConfigError(f"from_joeynmt: {side} option(s) {unknown} are not supported")
    if part.get("alpha", 1.0) != 1.0:
        raise ConfigError(f"from_joeynmt: {side}.alpha {part['alpha']!r} (a scaled residual) is not supported")
    if part.get("activation", "relu") != "relu":
        raise ConfigError(f"from_joeynmt: {side}.activation {part['activation']!r} is not supported (relu)")
    if part.get("layer_norm") not in ("pre", "post"):
        raise ConfigError(f"from_joeynmt: {side}.layer_norm must be given as 'pre' or 'post' (JoeyNMT's encoder and "
                          f"decoder default differently), got {part.get('layer_norm')!r}")
    return part


def from_joeynmt_transformer(state_dict: dict, cfg: dict, *, device: str = "cpu", backend=None, **config):
    """A ``transformer`` model from a JoeyNMT Transformer's ``state_dict`` and the ``model:`` section
    of its config (module docstring); ``config``: seqjit keywords overriding the derived ones."""
    from seqjit.convert.common import cast_floats, to_numpy_dict, unused_error
    from seqjit.models.devices import check_device
    from seqjit.models.transformer import TransformerConfig, TransformerModel
    from seqjit.models.weights_file import check_finite

    check_device(device)

    enc, dec = _side(cfg, "encoder"), _side(cfg, "decoder")
    if enc["layer_norm"] != dec["layer_norm"]:
        raise ConfigError(f"from_joeynmt: encoder.layer_norm {enc['layer_norm']!r} and decoder.layer_norm "
                          f"{dec['layer_norm']!r} differ; seqjit's Transformer has one norm placement")
    sd = to_numpy_dict(state_dict)
    check_finite("state_dict", sd)
    out = {}
    tables = [sd.pop(f"{side}.pe.pe", None) for side in ("encoder", "decoder")]
    if all(t is not None for t in tables):  # JoeyNMT's own float32 sinusoid: its rounding, bit for bit
        for side, table in zip(("encoder", "decoder"), tables):
            out[f"{side}.embed_positions.weight"] = table.reshape(table.shape[-2], table.shape[-1])
    for key, table, side in (("src_embed.lut.weight", "encoder.embed_tokens.weight", enc),
                             ("trg_embed.lut.weight", "decoder.embed_tokens.weight", dec)):
        if key not in sd:
            raise ModelFormatError(f"from_joeynmt: state_dict has no {key!r}")
        w = sd.pop(key)
        scale = (side.get("embeddings") or {}).get("scale", False)
        out[table] = w * np.asarray(math.sqrt(w.shape[1]), w.dtype) if scale else w
    for key, value in sd.items():
        new = key
        for pattern, repl in _RENAME:
            new = re.sub(pattern, repl, new)
        out[new] = value
    E = out["decoder.embed_tokens.weight"].shape[1]
    derived = dict(src_vocab_size=out["encoder.embed_tokens.weight"].shape[0],
                   tgt_vocab_size=out["decoder.embed_tokens.weight"].shape[0], d_model=E,
                   encoder_layers=enc.get("num_layers", 6), decoder_layers=dec.get("num_layers", 6),
                   encoder_heads=enc.get("num_heads", 8), decoder_heads=dec.get("num_heads", 8),
                   encoder_ffn_dim=enc.get("ff_size", 2048), decoder_ffn_dim=dec.get("ff_size", 2048),
                   activation="relu", norm_first=enc["layer_norm"] == "pre", layer_norm_eps=1e-6,
                   positions="learned" if "encoder.embed_positions.weight" in out else "sinusoidal",
                   position_layout="interleaved",
                   max_positions=out["encoder.embed_positions.weight"].shape[0] if "encoder.embed_positions.weight" in out
                   else 5000,
                   encoder_final_norm=enc["layer_norm"] == "pre", decoder_final_norm=dec["layer_norm"] == "pre",
                   share_embeddings=False, tie_output=False, pad_id=1, decoder_start_id=2, eos_id=3,
                   suppress_tokens=[2], suppress_pad_token=False)
    tc = TransformerConfig.from_dict({**derived, **config}, where="from_joeynmt")
    unused = set(out) - set(TransformerModel.weight_spec(tc))
    if unused:
        raise unused_error("from_joeynmt", unused)
    model = TransformerModel(tc, cast_floats(out, tc.dtype), backend=backend, source="from_joeynmt")
    return model.prepare() if device == "cpu" else model.to(device)


__all__ = ["from_joeynmt_transformer"]
