"""Import a Keras 3 LSTM/GRU encoder-decoder with attention from a ``.keras`` or ``.h5`` file,
reading its JSON config and HDF5 weights with ``h5py`` (no Keras, no code executed: a ``Lambda`` or
any other layer this module does not know is refused by name).

The model is the Keras tutorials' functional training graph, each layer called once::

    src -> Embedding -> LSTM|GRU(return_sequences, return_state)        encoder: memory, states
                        (or Bidirectional(LSTM|GRU(...)), merge_mode "concat" or "sum")
    tgt -> Embedding -> LSTM|GRU(return_sequences, initial_state=states) decoder: h [B, T, Hd]
    AdditiveAttention()([h, memory]) | Attention()([h, memory])         context [B, T, M]
    Concatenate()([h, context]) (either order)
    [Dense(Ao, activation="tanh" | "linear")] -> Dense(V, softmax | linear)

``Dropout`` layers may sit anywhere on those paths (identity at inference); either Dense may be
wrapped in ``TimeDistributed`` (the same per-step product). The file is read by
:mod:`seqjit.convert.keras_files` (regular file, bounded members, no external HDF5 storage or links). As seqjit's
``attention_seq2seq`` ("current" query, no input feeding, ``rnn_common`` names):

- LSTM: Keras kernel [I, 4H] (gates i, f, c, o: PyTorch's i, f, g, o), recurrent kernel [H, 4H],
  one bias -> ``weight_ih`` = kernel.T, ``weight_hh`` = recurrent.T, ``bias_ih`` = bias,
  ``bias_hh`` = 0. GRU (``reset_after=True``, Keras 3's default, PyTorch's formula): gates z, r, h
  reordered to PyTorch's r, z, n; bias [2, 3H] = (input bias, recurrent bias);
- ``AdditiveAttention``: ``score_j = sum(scale * tanh(h + m_j))`` (``scale`` [Hd] when ``use_scale``,
  else ones) is Bahdanau scoring with identity query/key projections, zero biases and ``Va`` = scale
  (needs Hd = M); ``Attention`` (``score_mode="dot"``): dot scoring, times its scalar ``scale`` when
  ``use_scale`` (``attention="general"`` with ``Wa`` = scale * I);
- the concatenation and the optional hidden Dense are the attentional layer ``decoder.concat``
  (``concat_order`` from the concatenation's order; without a hidden Dense it is the identity of
  width M + Hd, no activation); the last Dense is ``decoder.out`` (its softmax is the log-softmax
  seqjit's decoding applies, so scores are the model's log-probabilities);
- the decoder's ``initial_state`` the encoder's final states -> ``bridge="sum"`` (a one-direction
  encoder's states as they are); of a bidirectional encoder, ``Concatenate()([h_fwd, h_bwd])`` (and
  the same of c) -> ``bridge="concat"`` (Hd = 2H; the backward layer's weights are the
  ``_reverse`` ones); none -> ``bridge="zeros"``;
- ``Embedding(mask_zero=True)``: pad id 0 (seqjit masks padded source positions always; a model
  without masking sees the same attention on unpadded sources).

The start and end token ids are not in a Keras model: ``decoder_start_id`` and ``eos_id`` are
required keywords (``seqjit convert --from keras --config '{"decoder_start_id": 1, "eos_id": 2}'``).
Refused, naming the layer and option: stacked RNNs, other activations,
``reset_after=False``, ``go_backwards``, attention with a separate key or ``score_mode="concat"``,
shared layers, any other layer class.
"""
from __future__ import annotations

import numpy as np

from seqjit.convert.keras_files import read_keras
from seqjit.errors import ConfigError, ModelFormatError

PASSTHROUGH = ("Dropout", "SpatialDropout1D", "GaussianDropout", "AlphaDropout")
#: the mask computations Keras records in the graph (the padding mask of ``mask_zero`` embeddings, and
#: what it combines it into for a TimeDistributed layer's ``mask=``): they feed only ``mask=`` arguments,
#: which seqjit's source masking replaces; one on the data path is refused by the class checks there
MASK_OPS = ("NotEqual", "ConvertToTensor", "ExpandDims", "ZerosLike", "LogicalOr", "Any")
KNOWN = ("InputLayer", "Embedding", "LSTM", "GRU", "Bidirectional", "AdditiveAttention", "Attention",
         "Concatenate", "Dense", "TimeDistributed") + MASK_OPS + PASSTHROUGH


class _Layer:
    """One layer of the functional config: class, config, and the tensors it was called on as
    (layer name, output index) pairs: ``args`` (flattened) and ``initial_state``."""

    def __init__(self, entry: dict, where: str):
        self.cls, self.name = entry.get("class_name"), entry.get("name") or entry.get("config", {}).get("name")
        self.config = entry.get("config") or {}
        nodes = entry.get("inbound_nodes") or []
        if len(nodes) > 1:
            raise ModelFormatError(f"{where}: layer {self.name!r} is called {len(nodes)} times (shared layers are not "
                                   "supported: give the training model, each layer called once)")
        node = nodes[0] if nodes else {}
        if not isinstance(node, dict):
            raise ModelFormatError(f"{where}: layer {self.name!r} has a Keras 2 style inbound node; save the model "
                                   "with Keras 3")
        self.args = _refs(node.get("args"))
        self.initial_state = _refs((node.get("kwargs") or {}).get("initial_state"))
        self.kwargs = node.get("kwargs") or {}


def _refs(obj) -> list:
    """Every Keras tensor in a (nested) call argument, as (layer name, output index)."""
    out = []
    if isinstance(obj, dict):
        if obj.get("class_name") == "__keras_tensor__":
            layer, _, index = obj["config"]["keras_history"]
            return [(layer, int(index))]
        for value in obj.values():
            out += _refs(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            out += _refs(value)
    return out


# -- the graph ----------------------------------------------------------------------------------------
class _Graph:
    def __init__(self, config: dict, where: str):
        self.where = where
        if config.get("class_name") not in ("Functional", "Model"):
            raise ModelFormatError(f"{where}: a {config.get('class_name')!r} model; expected a functional Model")
        cfg = config.get("config") or {}
        self.layers = {}
        for entry in cfg.get("layers", []):
            layer = _Layer(entry, where)
            if layer.cls not in KNOWN:
                raise ModelFormatError(f"{where}: layer {layer.name!r} is a {layer.cls}, which seqjit does not import "
                                       f"(known: {', '.join(KNOWN)})")
            if layer.cls == "TimeDistributed":
                _unwrap_time_distributed(layer, where)
            self.layers[layer.name] = layer
        outputs = cfg.get("output_layers") or []
        if outputs and isinstance(outputs[0], str):  # one output is stored as [name, node, index]
            outputs = [outputs]
        if len(outputs) != 1:
            raise ModelFormatError(f"{where}: the model has {len(outputs)} outputs; expected one (the token scores)")
        self.output = self.resolve((outputs[0][0], int(outputs[0][2])))

    def resolve(self, ref) -> tuple:
        """``ref`` with Dropout layers skipped."""
        for _ in range(len(self.layers) + 1):
            if self.layers[ref[0]].cls not in PASSTHROUGH:
                return ref
            ref = self.layers[ref[0]].args[0]
        raise ModelFormatError(f"{self.where}: the Dropout layers before {ref[0]!r} form a cycle")

    def layer(self, ref, *classes) -> _Layer:
        layer = self.layers[self.resolve(ref)[0]]
        if layer.cls not in classes:
            raise ModelFormatError(f"{self.where}: expected a {' or '.join(classes)} layer here, got {layer.name!r} "
                                   f"({layer.cls})")
        return layer


def _unwrap_time_distributed(layer: _Layer, where: str) -> None:
    """``TimeDistributed(Dense)`` is the Dense itself (a Dense already acts on each time step): the
    layer becomes a Dense of the inner config, keeping the wrapper's name (its weights' name)."""
    inner = layer.config.get("layer") or {}
    if inner.get("class_name") != "Dense":
        raise ModelFormatError(f"{where}: TimeDistributed {layer.name!r} wraps a {inner.get('class_name')}; seqjit "
                               "imports TimeDistributed(Dense) only")
    layer.cls, layer.config = "Dense", inner.get("config") or {}


def _option(layer: _Layer, key: str, allowed, where: str, default=None):
    value = layer.config.get(key, default)
    if value not in allowed:
        raise ModelFormatError(f"{where}: layer {layer.name!r} has {key}={value!r}; seqjit imports "
                               f"{' or '.join(repr(a) for a in allowed)}")
    return value


def _check_rnn(layer: _Layer, where: str) -> None:
    for key, allowed, default in (("activation", ("tanh",), "tanh"), ("recurrent_activation", ("sigmoid",), "sigmoid"),
                                  ("go_backwards", (False,), False), ("return_sequences", (True,), False),
                                  ("stateful", (False,), False)):
        _option(layer, key, allowed, where, default)
    if layer.cls == "GRU":
        _option(layer, "reset_after", (True,), where, True)


def _rnn_weights(layer: _Layer, arrays: list, prefix: str, where: str) -> dict:
    """Keras LSTM/GRU weights -> PyTorch ``{prefix}.weight_ih_l0`` ... (gate order, transposes, biases)."""
    if len(arrays) not in (2, 3):
        raise ModelFormatError(f"{where}: layer {layer.name!r} has {len(arrays)} weights; expected kernel, "
                               "recurrent kernel (and bias)")
    kernel, recurrent = arrays[0], arrays[1]
    gates = 4 if layer.cls == "LSTM" else 3
    H = recurrent.shape[0]
    if recurrent.shape != (H, gates * H) or kernel.ndim != 2 or kernel.shape[1] != gates * H:
        raise ModelFormatError(f"{where}: layer {layer.name!r} kernels have shapes {list(kernel.shape)}, "
                               f"{list(recurrent.shape)}; expected [I, {gates}H] and [H, {gates}H]")
    zeros = np.zeros(gates * H, kernel.dtype)
    if layer.cls == "LSTM":
        order = np.arange(gates * H)  # i, f, c, o: PyTorch's order
        bias = arrays[2] if len(arrays) == 3 else zeros
        b_ih, b_hh = bias.reshape(-1), zeros
    else:
        order = np.concatenate([np.arange(H, 2 * H), np.arange(H), np.arange(2 * H, 3 * H)])  # z, r, h -> r, z, n
        bias = arrays[2] if len(arrays) == 3 else np.zeros((2, gates * H), kernel.dtype)
        if bias.shape != (2, gates * H):
            raise ModelFormatError(f"{where}: GRU {layer.name!r} bias has shape {list(bias.shape)}; expected [2, {3 * H}]")
        b_ih, b_hh = bias[0], bias[1]
    return {f"{prefix}.weight_ih_l0": kernel[:, order].T, f"{prefix}.weight_hh_l0": recurrent[:, order].T,
            f"{prefix}.bias_ih_l0": b_ih[order], f"{prefix}.bias_hh_l0": b_hh[order]}


class _LayerWeights(dict):
    """Layer name -> its weight arrays; a layer without weights in the file is a ModelFormatError."""

    def __init__(self, arrays: dict, where: str):
        super().__init__(arrays)
        self.where = where

    def __missing__(self, name):
        raise ModelFormatError(f"{self.where}: the file holds no weights for layer {name!r}")


def _inner(wrapper: _Layer, where: str) -> _Layer:
    """The LSTM/GRU inside a ``Bidirectional`` (one layer config for both directions)."""
    inner = wrapper.config.get("layer") or {}
    backward = wrapper.config.get("backward_layer")  # Keras 3 stores it always: the same layer, going backwards
    if backward is not None:
        same = ("units", "activation", "recurrent_activation", "use_bias", "reset_after")
        a, b = inner.get("config") or {}, backward.get("config") or {}
        if backward.get("class_name") != inner.get("class_name") or any(a.get(k) != b.get(k) for k in same):
            raise ModelFormatError(f"{where}: Bidirectional {wrapper.name!r} has a backward layer unlike its forward "
                                   "one; seqjit imports one layer config for both directions")
    if inner.get("class_name") not in ("LSTM", "GRU"):
        raise ModelFormatError(f"{where}: Bidirectional {wrapper.name!r} wraps a {inner.get('class_name')}; expected "
                               "LSTM or GRU")
    layer = _Layer({"class_name": inner["class_name"], "config": inner.get("config") or {}, "inbound_nodes": []}, where)
    layer.name = wrapper.name
    return layer


def _bridge(g: _Graph, enc: _Layer, cell: _Layer, dec: _Layer, where: str) -> str:
    """The bridge of a decoder started from the encoder's states: "sum" (one direction: its [h, c]
    or [h]) or "concat" (bidirectional: Concatenate([h_fwd, h_bwd]), and the same of c)."""
    lstm = cell.cls == "LSTM"
    want = "[h, c]" if lstm else "[h]"
    refs = [g.resolve(r) for r in dec.initial_state]
    if enc.cls != "Bidirectional":
        if refs != [(enc.name, 1), (enc.name, 2)][:2 if lstm else 1]:
            raise ModelFormatError(f"{where}: decoder {dec.name!r} must start from the encoder's final states {want}")
        return "sum"
    # Bidirectional(return_state) outputs: [out, h_fwd, (c_fwd,) h_bwd, (c_bwd)]
    per = 2 if lstm else 1
    expected = [[(enc.name, 1 + k), (enc.name, 1 + per + k)] for k in range(per)]
    found = []
    for ref in refs:
        layer = g.layers[ref[0]]
        found.append([g.resolve(r) for r in layer.args] if layer.cls == "Concatenate" else [ref])
    if found != expected:
        raise ModelFormatError(f"{where}: decoder {dec.name!r} must start from the bidirectional encoder's final "
                               f"states concatenated, forward first: Concatenate()([h_fwd, h_bwd]) for each of {want}")
    return "concat"


def from_keras(path, *, decoder_start_id: int | None = None, eos_id: int | None = None, **config):
    """An :class:`~seqjit.models.attention_seq2seq.AttentionSeq2SeqModel` from a Keras ``.keras`` /
    ``.h5`` file (see the module docstring); ``config``: more ``attention_seq2seq`` fields (``dtype``,
    ``pad_id`` when the embeddings do not mask zero)."""
    from seqjit.convert import from_torch

    where = str(path)
    if decoder_start_id is None or eos_id is None:
        raise ConfigError(f"{where}: a Keras model does not record its start and end tokens: give decoder_start_id and "
                          "eos_id (e.g. --config '{\"decoder_start_id\": 1, \"eos_id\": 2}')")
    raw_config, stored = read_keras(path)
    try:
        sd, extra = _convert(_Graph(raw_config, where), _LayerWeights({k: v for k, v in stored.items() if v}, where),
                             where)
    except (KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise ModelFormatError(f"{where}: the model's config is not a Keras 3 functional model's "
                               f"({type(exc).__name__}: {str(exc)[:200]})") from None
    return from_torch(sd, arch="attention_seq2seq", attention_query="current", decoder_start_id=decoder_start_id,
                      eos_id=eos_id, **{**extra, **config})


def _convert(g: _Graph, weights: _LayerWeights, where: str) -> tuple:
    """(seqjit state dict, config keywords) of the model graph ``g`` (module docstring)."""
    out = g.layer(g.output, "Dense")
    hidden = None
    before = g.layer(out.args[0], "Dense", "Concatenate")
    if before.cls == "Dense":
        hidden, before = before, g.layer(before.args[0], "Concatenate")
    concat = before
    if len(concat.args) != 2 or concat.config.get("axis", -1) not in (-1, 2):
        raise ModelFormatError(f"{where}: Concatenate {concat.name!r} must join the decoder output and the attention "
                               "context on the last axis")
    parts = [g.layers[g.resolve(r)[0]] for r in concat.args]
    classes = [p.cls for p in parts]
    att_classes = ("AdditiveAttention", "Attention")
    if sorted(c in att_classes for c in classes) != [False, True]:
        raise ModelFormatError(f"{where}: Concatenate {concat.name!r} joins {classes}; expected a recurrent layer's "
                               "output and an attention layer's")
    context_first = classes[0] in att_classes
    att = parts[0] if context_first else parts[1]
    if len(att.args) not in (2, 3) or (len(att.args) == 3 and g.resolve(att.args[2]) != g.resolve(att.args[1])):
        raise ModelFormatError(f"{where}: attention {att.name!r} must be called on [query, value] (keys = values)")
    if att.kwargs.get("use_causal_mask"):
        raise ModelFormatError(f"{where}: attention {att.name!r} uses a causal mask; seqjit attends over the source")
    dec = g.layer(att.args[0], "LSTM", "GRU")
    if g.resolve(att.args[0])[1] != 0 or dec is not (parts[1] if context_first else parts[0]):
        raise ModelFormatError(f"{where}: attention {att.name!r} must read the decoder RNN's output sequence, the one "
                               "concatenated with its context")
    enc = g.layer(att.args[1], "LSTM", "GRU", "Bidirectional")
    if g.resolve(att.args[1])[1] != 0 or enc is dec:
        raise ModelFormatError(f"{where}: attention {att.name!r} must attend over the encoder RNN's output sequence")
    cell = _inner(enc, where) if enc.cls == "Bidirectional" else enc
    if cell.cls != dec.cls:
        raise ModelFormatError(f"{where}: encoder {enc.name!r} is {cell.cls} and decoder {dec.name!r} {dec.cls}; "
                               "seqjit needs one cell kind")
    for layer in (cell, dec):
        _check_rnn(layer, where)
    src_emb, tgt_emb = g.layer(enc.args[0], "Embedding"), g.layer(dec.args[0], "Embedding")
    for layer in (src_emb, tgt_emb):
        g.layer(layer.args[0], "InputLayer")

    sd = {"encoder.embedding.weight": weights[src_emb.name][0], "decoder.embedding.weight": weights[tgt_emb.name][0]}
    extra = {}
    if enc.cls == "Bidirectional":
        arrays = weights[enc.name]
        half = len(arrays) // 2
        forward = _rnn_weights(cell, arrays[:half], "encoder.rnn", where)
        sd.update(forward)
        sd.update({k + "_reverse": v for k, v in _rnn_weights(cell, arrays[half:], "encoder.rnn", where).items()})
        merge = _option(enc, "merge_mode", ("concat", "sum"), where, "concat")
        extra["encoder_output"] = merge
    else:
        sd.update(_rnn_weights(enc, weights[enc.name], "encoder.rnn", where))
    sd.update(_rnn_weights(dec, weights[dec.name], "decoder.rnn", where))
    H, Hd = sd["encoder.rnn.weight_hh_l0"].shape[1], sd["decoder.rnn.weight_hh_l0"].shape[1]
    M = 2 * H if extra.get("encoder_output") == "concat" else H
    dt = sd["decoder.rnn.weight_hh_l0"].dtype
    p = "decoder.attention"
    if att.cls == "AdditiveAttention":
        if Hd != M:
            raise ModelFormatError(f"{where}: AdditiveAttention {att.name!r} adds queries ({Hd}) to keys ({M}): sizes differ")
        scale = weights[att.name][0] if att.config.get("use_scale", True) else np.ones(Hd, dt)
        eye = np.eye(Hd, dtype=dt)
        sd.update({f"{p}.Wa.weight": eye, f"{p}.Wa.bias": np.zeros(Hd, dt), f"{p}.Ua.weight": eye.copy(),
                   f"{p}.Ua.bias": np.zeros(Hd, dt), f"{p}.Va.weight": np.asarray(scale).reshape(1, -1)})
    else:
        _option(att, "score_mode", ("dot",), where, "dot")
        if att.config.get("use_scale", False):
            sd[f"{p}.Wa.weight"] = float(np.asarray(weights[att.name][0]).reshape(-1)[0]) * np.eye(Hd, M, dtype=dt)
    extra["concat_order"] = "context_first" if context_first else "hidden_first"
    if hidden is not None:
        activation = _option(hidden, "activation", ("tanh", "linear"), where, "linear")
        w = weights[hidden.name]
        sd["decoder.concat.weight"] = w[0].T
        if len(w) > 1:
            sd["decoder.concat.bias"] = w[1]
        extra["attentional_activation"] = "tanh" if activation == "tanh" else None
    else:
        sd["decoder.concat.weight"] = np.eye(Hd + M, dtype=dt)
        extra["attentional_activation"] = None
    _option(out, "activation", ("softmax", "linear", "log_softmax"), where, "linear")
    w = weights[out.name]
    sd["decoder.out.weight"] = w[0].T
    sd["decoder.out.bias"] = w[1] if len(w) > 1 else np.zeros(w[0].shape[1], dt)
    if dec.initial_state:
        extra["bridge"] = _bridge(g, enc, cell, dec, where)
    else:
        extra["bridge"] = "zeros"
    if src_emb.config.get("mask_zero") or tgt_emb.config.get("mask_zero"):
        extra["pad_id"] = 0
    return {k: np.ascontiguousarray(v) for k, v in sd.items()}, extra

__all__ = ["from_keras", "read_keras"]
