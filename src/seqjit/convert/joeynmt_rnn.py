"""Import a JoeyNMT recurrent model (``RecurrentEncoder`` + ``RecurrentDecoder``) as an
``attention_seq2seq`` model: :func:`from_joeynmt`.

Input: the model's ``state_dict`` (in memory: NumPy arrays or torch tensors) and the ``model:``
section of its config YAML (a plain dict). Nothing is unpickled here. A JoeyNMT checkpoint is a
pickle; read its weights with the restricted unpickler, which admits tensors and containers only::

    sd = torch.load("best.ckpt", map_location="cpu", weights_only=True)["model_state"]
    cfg = yaml.safe_load(open("config.yaml"))["model"]
    model = seqjit.convert.from_joeynmt(sd, cfg)

JoeyNMT's decoder step (``decoders.RecurrentDecoder._forward_step``): the RNN reads [e; h~ of the
previous step] (``input_feeding``, default true), the attention scores the new top state
(``bahdanau``: additive with bias-free ``query_layer``/``key_layer``/``energy_layer``; ``luong``:
``h . key_layer(m)``, seqjit's "general"), h~ = act(att_vector_layer([h; context])) and the logits
are ``output_layer(h~)`` (no bias). ``init_hidden``: ``bridge`` (default) -> seqjit bridge
"top_linear" (``act(bridge_layer([fwd; bwd]))`` of the top encoder layer, every decoder layer, an
LSTM's c0 = h0), ``last`` -> "last", ``zero`` -> "zeros". ``act``: the decoder's ``activation``
(default tanh; the only one seqjit's bridge has). Name map::

    src_embed.lut.weight                   -> encoder.embedding.weight   (x sqrt(dim) when scale)
    trg_embed.lut.weight                   -> decoder.embedding.weight   (x sqrt(dim) when scale)
    encoder.rnn.*, decoder.rnn.*           -> the same names
    decoder.bridge_layer.{weight,bias}     -> bridge.{weight,bias}
    decoder.att_vector_layer.{weight,bias} -> decoder.concat.{weight,bias}   (concat_order hidden_first)
    decoder.output_layer.weight            -> decoder.out.weight (decoder.out.bias: zeros)
    decoder.attention.query_layer.weight   -> decoder.attention.Wa.weight (bias: zeros)   bahdanau
    decoder.attention.key_layer.weight     -> decoder.attention.Ua.weight (bias: zeros)   bahdanau
    decoder.attention.energy_layer.weight  -> decoder.attention.Va.weight                 bahdanau
    decoder.attention.key_layer.weight     -> decoder.attention.Wa.weight                 luong

Special ids default to JoeyNMT's (``<unk>`` 0, ``<pad>`` 1, ``<s>`` 2, ``</s>`` 3); pass ``pad_id``,
``decoder_start_id``, ``eos_id`` for other vocabularies. JoeyNMT's greedy search also bans ``<s>``
and ends no hypothesis at step 0 (``min_output_length`` 1): give ``min_length=1`` to
:meth:`generate`; the ban is recorded in the config (``suppress_tokens=[decoder_start_id]``) for
the decoding options to read. Transformer models (encoder and decoder ``type: transformer``) go to
:mod:`seqjit.convert.joeynmt_transformer`; a recurrent encoder with a Transformer decoder (or the
reverse) and unknown options raise :class:`ConfigError` naming them.
"""
from __future__ import annotations

import math

import numpy as np

from seqjit.errors import ConfigError, ModelFormatError

_INIT_HIDDEN = {"bridge": "top_linear", "last": "last", "zero": "zeros", "zeros": "zeros"}
_ATTENTION = {"bahdanau": "bahdanau", "luong": "general"}
#: options read here, and those that only shape training (dropout, initialisers, freezing)
_KNOWN_MODEL = {"encoder", "decoder", "tied_embeddings", "tied_softmax", "initializer", "init_gain", "init_weight",
                "bias_initializer", "bias_init_weight", "embed_initializer", "embed_init_gain", "embed_init_weight",
                "init_rnn_orthogonal", "lstm_forget_gate"}
_KNOWN_SIDE = {"type", "rnn_type", "embeddings", "hidden_size", "num_layers", "bidirectional", "dropout", "emb_dropout",
               "hidden_dropout", "freeze", "attention", "init_hidden", "input_feeding", "activation"}


def _side(cfg: dict, side: str) -> dict:
    part = cfg.get(side)
    if not isinstance(part, dict):
        raise ConfigError(f"from_joeynmt: model config has no {side!r} section (pass the YAML's 'model:' part)")
    if part.get("type", "recurrent") != "recurrent":
        raise ConfigError(f"from_joeynmt: {side}.type {part.get('type')!r} is not supported (recurrent models only)")
    unknown = sorted(set(part) - _KNOWN_SIDE)
    if unknown:
        raise ConfigError(f"from_joeynmt: {side} option(s) {unknown} are not supported")
    if not isinstance(part.get("embeddings", {}), dict):
        raise ConfigError(f"from_joeynmt: {side}.embeddings must be a mapping, got {type(part['embeddings']).__name__}")
    return part


def _options(cfg: dict) -> dict:
    """seqjit config keywords from JoeyNMT's ``model:`` section."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"from_joeynmt: the model config must be a dict, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - _KNOWN_MODEL)
    if unknown:
        raise ConfigError(f"from_joeynmt: model option(s) {unknown} are not supported")
    enc, dec = _side(cfg, "encoder"), _side(cfg, "decoder")
    if cfg.get("tied_softmax"):
        raise ConfigError("from_joeynmt: tied_softmax needs a Transformer decoder in JoeyNMT; not a recurrent model")
    activation = dec.get("activation", "tanh")
    if activation != "tanh":
        raise ConfigError(f"from_joeynmt: decoder.activation {activation!r} is not supported (tanh only)")
    init_hidden = dec.get("init_hidden", "bridge")
    attention = dec.get("attention", "bahdanau")
    for key, value, table in (("init_hidden", init_hidden, _INIT_HIDDEN), ("attention", attention, _ATTENTION)):
        if value not in table:
            raise ConfigError(f"from_joeynmt: decoder.{key} {value!r} is not supported; one of {sorted(table)}")
    if enc.get("rnn_type", "gru") != dec.get("rnn_type", "gru"):
        raise ConfigError(f"from_joeynmt: encoder.rnn_type {enc.get('rnn_type', 'gru')!r} and decoder.rnn_type "
                          f"{dec.get('rnn_type', 'gru')!r} differ; seqjit needs one cell type")
    bridge = _INIT_HIDDEN[init_hidden]
    out = dict(bridge=bridge, attention_query="current", concat_order="hidden_first", attentional_activation="tanh",
               input_feeding=bool(dec.get("input_feeding", True)), pad_id=1, decoder_start_id=2, eos_id=3)
    if bridge == "top_linear":
        out["bridge_activation"] = "tanh"
    if dec.get("rnn_type", "gru") == "lstm" and bridge != "zeros":
        out["bridge_cell"] = "hidden"
    return out


def _scaled(table: np.ndarray, embeddings: dict) -> np.ndarray:
    return table * np.asarray(math.sqrt(table.shape[1]), table.dtype) if embeddings.get("scale", False) else table


def joeynmt_state_dict(state_dict: dict, cfg: dict) -> dict:
    """JoeyNMT's names -> seqjit's canonical ``attention_seq2seq`` names (see the module docstring)."""
    sd = {k: np.asarray(v) for k, v in state_dict.items()}
    enc, dec = cfg["encoder"], cfg["decoder"]
    out = {}
    for name in ("src_embed.lut.weight", "trg_embed.lut.weight", "decoder.output_layer.weight"):
        if name not in sd:
            raise ModelFormatError(f"from_joeynmt: state_dict has no {name!r}")
    out["encoder.embedding.weight"] = _scaled(sd.pop("src_embed.lut.weight"), enc.get("embeddings", {}))
    out["decoder.embedding.weight"] = _scaled(sd.pop("trg_embed.lut.weight"), dec.get("embeddings", {}))
    w_out = sd.pop("decoder.output_layer.weight")
    out["decoder.out.weight"], out["decoder.out.bias"] = w_out, np.zeros(w_out.shape[0], w_out.dtype)
    renames = {"decoder.bridge_layer.": "bridge.", "decoder.att_vector_layer.": "decoder.concat."}
    p = "decoder.attention"
    if dec.get("attention", "bahdanau") == "bahdanau":
        renames.update({f"{p}.query_layer.": f"{p}.Wa.", f"{p}.key_layer.": f"{p}.Ua.", f"{p}.energy_layer.": f"{p}.Va."})
    else:
        renames[f"{p}.key_layer."] = f"{p}.Wa."
    for key, value in sd.items():
        new = key
        for old, repl in renames.items():
            if key.startswith(old):
                new = repl + key[len(old):]
        out[new] = value
    for name in (f"{p}.Wa", f"{p}.Ua"):
        if dec.get("attention", "bahdanau") == "bahdanau" and f"{name}.weight" in out and f"{name}.bias" not in out:
            out[f"{name}.bias"] = np.zeros(out[f"{name}.weight"].shape[0], out[f"{name}.weight"].dtype)
    return out


def from_joeynmt(state_dict: dict, cfg: dict, *, device: str = "cpu", **config):
    """An ``attention_seq2seq`` model from a JoeyNMT recurrent model's ``state_dict`` and the
    ``model:`` section of its config (see the module docstring); ``config``: seqjit keywords that
    override the derived ones (special ids, ``dtype``, ``backend``)."""
    from seqjit.convert import from_torch

    types = {side: (cfg.get(side) or {}).get("type", "recurrent") if isinstance(cfg, dict) else None
             for side in ("encoder", "decoder")}
    if "transformer" in types.values() and types["encoder"] != types["decoder"]:
        raise ConfigError(f"from_joeynmt: encoder.type {types['encoder']!r} and decoder.type {types['decoder']!r} "
                          "differ; seqjit converts recurrent or Transformer models, not a mix")
    if set(types.values()) == {"transformer"}:
        from seqjit.convert.joeynmt_transformer import from_joeynmt_transformer

        return from_joeynmt_transformer(state_dict, cfg, device=device, **config)
    options = {**_options(cfg), **config}
    options.setdefault("suppress_tokens", [options["decoder_start_id"]])  # JoeyNMT's searches ban <s>
    return from_torch(joeynmt_state_dict(state_dict, cfg), arch="attention_seq2seq", device=device, **options)


__all__ = ["from_joeynmt", "joeynmt_state_dict"]
