"""Import PyTorch RNN encoder-decoders: ``arch="rnn_seq2seq"`` and ``arch="attention_seq2seq"``.

Call through :func:`seqjit.convert.from_torch`: ``from_torch(model.state_dict(), arch=..., **config)``
(values NumPy arrays or torch tensors; nothing is unpickled). Names start with ``encoder.`` and
``decoder.`` (the attributes of a container module); the tutorial keeps two separate modules: join
their state dicts with :func:`join_state_dicts`. Expected names (G = 3 GRU, 4 LSTM; H encoder hidden,
Hd decoder hidden, Es/Et embedding dims, M memory size, A attention size, V vocabularies)::

    encoder.embedding.weight                        [Vs, Es]
    encoder.{gru|lstm|rnn}.weight_ih_l{k}[_reverse] [G*H, Es or D*H]     an nn.GRU / nn.LSTM,
    encoder.{gru|lstm|rnn}.weight_hh_l{k}[_reverse] [G*H, H]             batch_first, with biases
    encoder.{gru|lstm|rnn}.bias_{ih|hh}_l{k}[_reverse] [G*H]
    bridge.weight [H, 2H], bridge.bias [H]          optional: a bidirectional encoder's final
    bridge_c.weight, bridge_c.bias                    states through nn.Linear(2H, H) (LSTM: c too)
    decoder.embedding.weight                        [Vt, Et]
    decoder.{gru|lstm|rnn}.*_l{k}                   [G*Hd, ...], the decoder RNN
    decoder.out.weight [Vt, Hd], decoder.out.bias [Vt]
  attention_seq2seq, Bahdanau (the tutorial's AttnDecoderRNN + BahdanauAttention):
    decoder.attention.Wa.weight [A, Hd], .Wa.bias [A], .Ua.weight [A, M], .Ua.bias [A],
    decoder.attention.Va.weight [1, A], .Va.bias [1] (dropped: it shifts every score equally)
  attention_seq2seq, Luong:
    decoder.attention.Wa.weight [Hd, M] (+ .Wa.bias)   "general" (absent: "dot")
    decoder.concat.weight [Hd, M + Hd] (+ .bias)       h~ = tanh(W_c [context; h] + b)

  variants (rnn_common / attention_seq2seq docstrings):
    bridge.weight [Hd, M or D*H], bridge.bias [Hd]     bridge="mean" / "top_linear" (keyword)
    decoder.out_hidden.{weight,bias} [K, Ho], [K]      output_layer="mlp"
    decoder.maxout.{weight,bias} [2K, Ho], [2K]        output_layer="maxout" (pairs of rows)
    decoder.concat.weight [Ao, M + Hd] with Ua         Bahdanau scoring after the step
    decoder.attention.W.weight [A, Qd + M],            Luong's concat score v . tanh(W [q; m]) (Qd:
    decoder.attention.v.weight [1, A]                  Hd, or Ld*Hd with attention_query_layers "concat")

Read from the weights (a contradicting keyword raises ConfigError): vocabulary sizes, embedding
dims, ``hidden_size``, ``cell``, ``num_layers``, ``decoder_layers`` (when the decoder RNN has
another count), ``bidirectional``, ``bridge`` ("linear" when ``bridge.weight`` exists, "concat"
when Hd = 2H, "stack" when a bidirectional encoder's decoder has twice its layers (IndicXlit: each
final state starts one decoder layer), else "sum"; the one-value bridges "mean", "top_linear", "last", "zeros" have
weights that look alike, so ``bridge=`` names them, and then ``decoder_hidden_size`` is read),
``attention`` (bahdanau when Ua exists, concat when W does, general when only Wa does, else dot),
``attention_query`` ("current" when ``decoder.concat.weight`` exists), ``attention_dim``,
``attentional_dim``, ``input_feeding`` (the decoder RNN reads Et + Ao), ``encoder_output``
("sum" when a bidirectional encoder's M = H), ``attention_bias``, ``concat_bias``,
``output_layer`` and ``output_hidden_dim``. Keywords give the rest: ``decoder_input_activation``
("relu" for the tutorial's DecoderRNN), ``output_log_softmax`` (True reproduces the tutorial
decoders' log-probabilities), ``bridge_activation``, ``bridge_cell``, ``concat_order``,
``attentional_activation``, ``output_activation``, ``attention_query_layers``, ``deep_output``
(the output layer's input width then includes M + Et), ``pad_id``/``decoder_start_id``/``eos_id``,
``dtype``; ``ignore``: names (or prefixes ending in ".") to skip; ``backend``.
"""
from __future__ import annotations

import re

import numpy as np

from seqjit.convert.common import cast_floats
from seqjit.errors import ConfigError, ModelFormatError
from seqjit.models.rnn_common import ONE_VALUE_BRIDGES

_RNN_NAME = re.compile(r"^(encoder|decoder)\.(?:gru|lstm|rnn)\.((?:weight|bias)_(?:ih|hh)_l\d+(?:_reverse)?)$")
_DROPPED = ("decoder.attention.Va.bias", "decoder.attention.v.bias")


def _rename(sd: dict, source: str) -> dict:
    """Canonical names (``{encoder,decoder}.rnn.*``); refuses two RNN spellings on one side."""
    out, spelling = {}, {}
    for key, value in sd.items():
        m = _RNN_NAME.match(key)
        if m:
            side, param = m.groups()
            attr = key.split(".")[1]
            if spelling.setdefault(side, attr) != attr:
                raise ModelFormatError(f"{source}: {side} has weights under both {side}.{spelling[side]}. and {side}.{attr}.")
            key = f"{side}.rnn.{param}"
        out[key] = value
    return out


def _need(sd: dict, name: str, source: str, what: str) -> np.ndarray:
    if name not in sd:
        raise ModelFormatError(f"{source}: state_dict has no {name!r} ({what})")
    value = sd[name]
    if value.ndim != 2:
        raise ModelFormatError(f"{source}: {name} must be 2-D ({what}), got shape {list(value.shape)}")
    return value


def _rnn_layout(sd: dict, side: str, source: str) -> tuple:
    """(cell, hidden, layers, bidirectional) of the ``{side}.rnn`` weights."""
    w = _need(sd, f"{side}.rnn.weight_hh_l0", source, f"the {side} RNN's [G*H, H] recurrent weight")
    ratio, rest = divmod(w.shape[0], w.shape[1]) if w.shape[1] else (0, 1)
    if rest or ratio not in (3, 4):
        raise ModelFormatError(f"{source}: {side}.rnn.weight_hh_l0 has shape {list(w.shape)}; expected [3*H, H] (GRU) "
                               "or [4*H, H] (LSTM)")
    names = [k for k in sd if k.startswith(f"{side}.rnn.")]
    layers = 1 + max(int(re.search(r"_l(\d+)", k).group(1)) for k in names)
    bidirectional = any(k.endswith("_reverse") for k in names)
    return ("gru" if ratio == 3 else "lstm"), int(w.shape[1]), layers, bidirectional


def _import(state_dict: dict, arch: str, *, backend=None, ignore=(), **config):
    from seqjit.models import model_class

    source = f"from_torch(arch={arch!r})"
    sd = {k: np.asarray(v) for k, v in state_dict.items()
          if not any(k == i or (i.endswith(".") and k.startswith(i)) for i in ignore)}
    sd = _rename(sd, source)
    for name in _DROPPED:
        if name in sd and sd.pop(name).size != 1:
            raise ModelFormatError(f"{source}: {name} must have one element (nn.Linear(A, 1)'s bias)")
    cell, hidden, layers, bidirectional = _rnn_layout(sd, "encoder", source)
    dec_cell, dec_hidden, dec_layers, dec_bi = _rnn_layout(sd, "decoder", source)
    if (dec_cell, dec_bi) != (cell, False):
        raise ModelFormatError(f"{source}: the decoder RNN ({dec_cell}, bidirectional={dec_bi}) must be a "
                               f"unidirectional {cell} like the encoder")
    src_table = _need(sd, "encoder.embedding.weight", source, "the source embedding [Vs, Es]")
    tgt_table = _need(sd, "decoder.embedding.weight", source, "the target embedding [Vt, Et]")
    inferred = dict(src_vocab_size=src_table.shape[0], embed_dim=src_table.shape[1], tgt_vocab_size=tgt_table.shape[0],
                    tgt_embed_dim=tgt_table.shape[1], hidden_size=hidden, cell=cell, num_layers=layers,
                    bidirectional=bidirectional)
    if config.get("bridge") in ONE_VALUE_BRIDGES:  # the weights cannot tell these apart: the keyword says
        inferred["decoder_hidden_size"] = dec_hidden
    elif bidirectional and config.get("bridge") not in ("layer_mix", "stack"):  # layer_mix: bridge.weight [L*H, L*H]
        inferred["bridge"] = "linear" if "bridge.weight" in sd else ("concat" if dec_hidden == 2 * hidden else
                                                                     "stack" if dec_layers == 2 * layers else "sum")
    if dec_layers != layers:
        inferred["decoder_layers"] = dec_layers
    inferred.update(_output_layout(sd, source))
    if arch == "attention_seq2seq":
        query_dim = dec_hidden * (dec_layers if config.get("attention_query_layers") == "concat" else 1)
        inferred.update(_attention_layout(sd, hidden, dec_hidden, bidirectional, source, tgt_table.shape[1], query_dim))
    clash = sorted(k for k in inferred if k in config and config[k] != inferred[k])
    if clash:
        raise ConfigError(f"{source}: {', '.join(f'{k}={config[k]!r}' for k in clash)} contradict(s) the weights "
                          f"({', '.join(f'{k}={inferred[k]!r}' for k in clash)})")
    cls = model_class(arch)
    cfg = cls.config_class.from_dict({**inferred, **config}, where=source)
    return cls(cfg, cast_floats(sd, cfg.dtype), backend=backend, source=source)


def _output_layout(sd: dict, source: str) -> dict:
    """``output_layer`` and ``output_hidden_dim`` from the weights present."""
    if "decoder.out_hidden.weight" in sd:
        w = _need(sd, "decoder.out_hidden.weight", source, "the MLP output layer's first linear [K, Ho]")
        return dict(output_layer="mlp", output_hidden_dim=w.shape[0])
    if "decoder.maxout.weight" in sd:
        rows = _need(sd, "decoder.maxout.weight", source, "the maxout layer [2K, Ho]").shape[0]
        if rows % 2:
            raise ModelFormatError(f"{source}: decoder.maxout.weight has {rows} rows; maxout pools pairs of rows (2K)")
        return dict(output_layer="maxout", output_hidden_dim=rows // 2)
    return {}


def _attention_layout(sd: dict, hidden: int, dec_hidden: int, bidirectional: bool, source: str, tgt_embed: int,
                      query_dim: int) -> dict:
    p = "decoder.attention"
    has_concat = "decoder.concat.weight" in sd
    if f"{p}.Ua.weight" in sd:
        ua = _need(sd, f"{p}.Ua.weight", source, "Bahdanau's key projection [A, M]")
        found = dict(attention="bahdanau", attention_dim=ua.shape[0])
        memory = ua.shape[1]
    elif f"{p}.W.weight" in sd:
        w = _need(sd, f"{p}.W.weight", source, "Luong's concat score W [A, Qd + M]")
        found = dict(attention="concat", attention_dim=w.shape[0])
        if not has_concat:
            found["attention_query"] = "previous"
        memory = w.shape[1] - query_dim
    else:
        found = dict(attention="general" if f"{p}.Wa.weight" in sd else "dot", attention_bias=f"{p}.Wa.bias" in sd)
        w_c = _need(sd, "decoder.concat.weight", source, "Luong's attentional layer [Ao, M + Hd]")
        memory = w_c.shape[1] - dec_hidden
    if has_concat:  # an attentional layer after the step: "current" query
        w_c = _need(sd, "decoder.concat.weight", source, "the attentional layer [Ao, M + Hd]")
        found.update(attention_query="current", concat_bias="decoder.concat.bias" in sd)
        if w_c.shape[0] != dec_hidden:
            found["attentional_dim"] = w_c.shape[0]
        rnn_in = _need(sd, "decoder.rnn.weight_ih_l0", source, "the decoder RNN's input weight").shape[1]
        found["input_feeding"] = rnn_in == tgt_embed + w_c.shape[0]
    if bidirectional:
        found["encoder_output"] = "sum" if memory == hidden else "concat"
    return found


def from_torch_rnn_seq2seq(state_dict: dict, **config):
    """An :class:`~seqjit.models.rnn_seq2seq.RNNSeq2SeqModel` from a state dict (see the module docstring)."""
    return _import(state_dict, "rnn_seq2seq", **config)


def from_torch_attention_seq2seq(state_dict: dict, **config):
    """An :class:`~seqjit.models.attention_seq2seq.AttentionSeq2SeqModel` from a state dict (see the module docstring)."""
    return _import(state_dict, "attention_seq2seq", **config)


def join_state_dicts(encoder: dict, decoder: dict, **others: dict) -> dict:
    """One state dict from separate modules' state dicts: keys prefixed ``encoder.``, ``decoder.``
    (and ``<name>.`` for each keyword, e.g. ``bridge=bridge.state_dict()``)."""
    joined = {}
    for prefix, sd in {"encoder": encoder, "decoder": decoder, **others}.items():
        if not hasattr(sd, "items"):
            raise TypeError(f"{prefix} must be a state dict (a mapping of name -> tensor), got {type(sd).__name__}")
        joined.update({f"{prefix}.{k}": v for k, v in sd.items()})
    return joined
