"""Import an OpenNMT-py (3.x) RNN model (``encoder_type`` rnn/brnn, ``decoder_type`` rnn) as an
``attention_seq2seq`` model: :func:`from_opennmt` (a Transformer, ``encoder_type`` and
``decoder_type`` transformer, goes to :mod:`seqjit.convert.opennmt_transformer`).

Input: the model's ``state_dict`` (``checkpoint["model"]`` plus ``checkpoint["generator"]`` under
``generator.``; in memory: NumPy arrays or torch tensors) and its options as a dict
(``vars(checkpoint["opt"])``). Nothing is unpickled here. An OpenNMT-py checkpoint is a pickle
holding an ``argparse.Namespace``; read it with the restricted unpickler, admitting that one class::

    with torch.serialization.safe_globals([argparse.Namespace]):
        ckpt = torch.load("model.pt", map_location="cpu", weights_only=True)
    sd = {**ckpt["model"], **{"generator." + k: v for k, v in ckpt["generator"].items()}}
    model = seqjit.convert.from_opennmt(sd, vars(ckpt["opt"]))

OpenNMT-py's step (``decoders/decoder.py``, ``modules/global_attention.py``): with ``brnn`` the
encoder has ``enc_hid_size / 2`` units per direction and decoder layer l starts from
``[h_fwd_l; h_bwd_l]`` (seqjit bridge "concat"; with ``-bridge`` the final states first go through
``RNNEncoder._bridge``: seqjit bridge "layer_mix", relu); the RNN reads [e; h~ of the previous step]
(``input_feed`` 1, the default: ``InputFeedRNNDecoder``'s stacked cells) or e (``StdRNNDecoder``);
``GlobalAttention`` scores the new top state h: ``dot`` h.m, ``general`` (W_in h).m (seqjit's
``Wa`` = W_in transposed), ``mlp`` v.tanh(W_q h + b_q + W_c m); h~ = ``linear_out([c; h])``, tanh'd
for dot/general only (``mlp``'s linear_out has a bias and no tanh); with ``context_gate``
(source/target/both) h~ goes through the gate (``onmt/modules/gate.py``: seqjit's ``context_gate``,
reading the RNN input, the new top state and h~); logits = ``generator(h~)``.
Name map::

    encoder.embeddings.make_embedding.emb_luts.0.weight -> encoder.embedding.weight
    decoder.embeddings.make_embedding.emb_luts.0.weight -> decoder.embedding.weight
    encoder.rnn.*                                       -> encoder.rnn.*
    decoder.rnn.layers.{l}.{weight,bias}_{ih,hh}        -> decoder.rnn.{weight,bias}_{ih,hh}_l{l}
    decoder.rnn.*_l{l} (StdRNNDecoder)                  -> the same names
    decoder.attn.linear_in.weight                       -> decoder.attention.Wa.weight (transposed)
    decoder.attn.linear_query.{weight,bias}             -> decoder.attention.Wa.{weight,bias}  (mlp)
    decoder.attn.linear_context.weight                  -> decoder.attention.Ua.weight (bias: zeros)
    decoder.attn.v.weight                               -> decoder.attention.Va.weight
    decoder.attn.linear_out.{weight,bias}               -> decoder.concat.{weight,bias}
    generator.{weight,bias}                             -> decoder.out.{weight,bias}
    encoder.bridge.{0,1}.{weight,bias}                  -> bridge.*, bridge_c.* (-bridge; 1: LSTM c)
    decoder.context_gate.context_gate.{gate,source_proj,target_proj}.{weight,bias}
                                                        -> decoder.context_gate.*  (context_gate)

The logits are the generator's (OpenNMT-py takes their log-softmax: the same ranking). Special ids
default to OpenNMT-py's (``<unk>`` 0, ``<blank>`` 1, ``<s>`` 2, ``</s>`` 3). OpenNMT-py's searches
ban no token: the config records ``suppress_pad_token=False``, which decoding reads as that option's
default. Options seqjit does not
run (``coverage_attn``,
``sparsemax``, ``position_encoding``, source features, other encoder/decoder types, different
encoder and decoder sizes) raise :class:`ConfigError` naming the option; a copy-attention model
(``copy_attn``: its generator is a copy generator) a :class:`ModelFormatError` naming it.
"""
from __future__ import annotations

import re

import numpy as np

from seqjit.convert.opennmt_options import check_options
from seqjit.errors import ConfigError, ModelFormatError

_LAYER_CELL = re.compile(r"^decoder\.rnn\.layers\.(\d+)\.((?:weight|bias)_(?:ih|hh))$")
#: option -> the values seqjit runs (absent options take OpenNMT-py's default)
_MUST = {"decoder_type": ("rnn",), "bridge": (False, True), "context_gate": (None, "source", "target", "both"),
         "copy_attn": (False,),
         "coverage_attn": (False,), "global_attention_function": ("softmax",), "generator_function": ("softmax",),
         "position_encoding": (False,), "global_attention": ("dot", "general", "mlp"),
         "rnn_type": ("LSTM", "GRU"), "encoder_type": ("rnn", "brnn")}


def _options(opt: dict) -> dict:
    """seqjit config keywords from OpenNMT-py's model options."""
    if not isinstance(opt, dict):
        raise ConfigError(f"from_opennmt: the options must be a dict (vars(checkpoint['opt'])), got {type(opt).__name__}")
    if opt.get("copy_attn"):
        raise ModelFormatError("from_opennmt: option copy_attn=True: the model has OpenNMT-py's copy generator "
                               "(its output mixes a copy distribution over the source tokens, weighted by a learned "
                               "switch, into the vocabulary's), which seqjit does not run; only models trained "
                               "without -copy_attn convert")
    check_options(opt, _MUST)
    for key in ("enc_layers", "dec_layers", "enc_hid_size", "dec_hid_size"):
        if key not in opt:
            raise ConfigError(f"from_opennmt: option {key!r} is missing (pass vars(checkpoint['opt']))")
    if opt["enc_layers"] != opt["dec_layers"] or opt["enc_hid_size"] != opt["dec_hid_size"]:
        raise ConfigError(f"from_opennmt: enc_layers/enc_hid_size ({opt['enc_layers']}, {opt['enc_hid_size']}) and "
                          f"dec_layers/dec_hid_size ({opt['dec_layers']}, {opt['dec_hid_size']}) differ; OpenNMT-py "
                          "hands encoder layer l's final state to decoder layer l")
    attention = opt.get("global_attention", "general")
    out = dict(attention={"mlp": "bahdanau"}.get(attention, attention), attention_query="current",
               concat_order="context_first", concat_bias=attention == "mlp",
               attentional_activation=None if attention == "mlp" else "tanh",
               input_feeding=bool(opt.get("input_feed", 1)), pad_id=1, decoder_start_id=2, eos_id=3,
               suppress_pad_token=False)
    if opt.get("context_gate") is not None:
        out["context_gate"] = opt["context_gate"]
    if opt.get("bridge"):
        out.update(bridge="layer_mix", bridge_activation="relu")
    elif opt.get("encoder_type", "rnn") == "brnn":
        out["bridge"] = "concat"
    return out


def opennmt_state_dict(state_dict: dict, opt: dict) -> dict:
    """OpenNMT-py's names -> seqjit's canonical ``attention_seq2seq`` names (module docstring)."""
    out, p = {}, "decoder.attention"
    for key, value in state_dict.items():
        value = np.asarray(value)
        m = _LAYER_CELL.match(key)
        if m:
            out[f"decoder.rnn.{m.group(2)}_l{m.group(1)}"] = value
            continue
        if key.startswith("decoder.context_gate.context_gate."):  # Source/Target/BothContextGate.context_gate
            out["decoder.context_gate." + key[len("decoder.context_gate.context_gate."):]] = value
            continue
        if ".emb_luts." in key and not key.endswith("emb_luts.0.weight"):
            raise ConfigError(f"from_opennmt: {key}: source/target features are not supported")
        new = {"encoder.embeddings.make_embedding.emb_luts.0.weight": "encoder.embedding.weight",
               "decoder.embeddings.make_embedding.emb_luts.0.weight": "decoder.embedding.weight",
               "decoder.attn.linear_in.weight": f"{p}.Wa.weight", "decoder.attn.linear_query.weight": f"{p}.Wa.weight",
               "decoder.attn.linear_query.bias": f"{p}.Wa.bias", "decoder.attn.linear_context.weight": f"{p}.Ua.weight",
               "decoder.attn.v.weight": f"{p}.Va.weight", "decoder.attn.linear_out.weight": "decoder.concat.weight",
               "decoder.attn.linear_out.bias": "decoder.concat.bias", "generator.weight": "decoder.out.weight",
               "encoder.bridge.0.weight": "bridge.weight", "encoder.bridge.0.bias": "bridge.bias",
               "encoder.bridge.1.weight": "bridge_c.weight", "encoder.bridge.1.bias": "bridge_c.bias",
               "generator.bias": "decoder.out.bias"}.get(key, key)
        if key == "decoder.attn.linear_in.weight":  # (W_in h) . m = h . (W_in^T m)
            value = np.ascontiguousarray(value.T)
        out[new] = value
    if f"{p}.Ua.weight" in out:
        out[f"{p}.Ua.bias"] = np.zeros(out[f"{p}.Ua.weight"].shape[0], out[f"{p}.Ua.weight"].dtype)
    if "decoder.out.weight" not in out:
        raise ModelFormatError("from_opennmt: state_dict has no 'generator.weight' (add checkpoint['generator'] "
                               "under 'generator.')")
    return out


def from_opennmt(state_dict: dict, opt: dict, *, device: str = "cpu", **config):
    """An ``attention_seq2seq`` model from an OpenNMT-py RNN model's ``state_dict`` (generator
    included) and its options dict (see the module docstring); ``config``: seqjit keywords that
    override the derived ones (special ids, ``dtype``, ``backend``)."""
    from seqjit.convert import from_torch

    if isinstance(opt, dict) and "transformer" in (opt.get("encoder_type"), opt.get("decoder_type")):
        if (opt.get("encoder_type"), opt.get("decoder_type")) != ("transformer", "transformer"):
            raise ConfigError(f"from_opennmt: option encoder_type={opt.get('encoder_type')!r} with "
                              f"decoder_type={opt.get('decoder_type')!r}: seqjit converts RNN or Transformer models, "
                              "not a mix")
        from seqjit.convert.opennmt_transformer import from_opennmt_transformer

        return from_opennmt_transformer(state_dict, opt, device=device, **config)
    options = _options(opt)  # the options first: a file's unsupported option named before its weights are read
    return from_torch(opennmt_state_dict(state_dict, opt), arch="attention_seq2seq", device=device,
                      **{**options, **config})


__all__ = ["from_opennmt", "opennmt_state_dict"]
