"""What the two RNN architectures (``rnn_seq2seq``, ``attention_seq2seq``) share: the config
fields, the weight layout of the embeddings, encoder, bridge and decoder RNN, and the decoder-state
specs. Graph pieces are in :mod:`seqjit.models.rnn_graphs`.

Sizes: Vs/Vt source/target vocabulary, Es/Et embedding dims, H encoder hidden size per direction,
D directions (2 when ``bidirectional``), L ``num_layers`` (encoder and decoder alike), G gates (3 GRU,
4 LSTM), Hd the decoder hidden size (2H when a bidirectional encoder uses ``bridge="concat"``, else H).

Encoder: ``nn.Embedding`` -> ``nn.GRU``/``nn.LSTM`` (batch-first, L layers, D directions; padded rows
run with packed-sequence semantics). Its final states initialise the decoder (Ld =
``decoder_layers`` layers, default L) as ``bridge`` says. Per-layer bridges (Ld = L; decoder layer l
reads encoder layer l's final forward and backward states ``h_n[2l]``, ``h_n[2l+1]``, and likewise
``c_n``):

- ``"sum"``:    ``h0[l] = h_fwd + h_bwd`` (Hd = H; a unidirectional encoder's states as they are);
- ``"concat"``: ``h0[l] = [h_fwd; h_bwd]`` (Hd = 2H; OpenNMT's layout for bidirectional encoders);
- ``"linear"``: ``h0[l] = act(bridge([h_fwd; h_bwd]))`` with one ``nn.Linear(2H, H)`` shared by the
  layers (``act``: ``bridge_activation``, None or "tanh"); an LSTM's cell state goes through its own
  ``bridge_c`` linear;
- ``"layer_mix"`` (OpenNMT-py ``-bridge``, ``RNNEncoder._bridge``, act "relu"): the final states of
  every layer and direction in PyTorch's order, per row [l0 fwd; l0 bwd; l1 fwd; ...] (L*D*H values),
  cut into D pieces of L*H, each through ``act(bridge(.))`` (one ``nn.Linear(L*H, L*H)``), put back
  in order; decoder layer l then reads its D*H values as ``"concat"`` does (Hd = D*H; so for L = 1 the
  linear maps each direction alone, for L = 2 bidirectional each layer's [fwd; bwd], for a
  unidirectional encoder every layer's states together); an LSTM's c through ``bridge_c``.
- ``"stack"`` (IndicXlit): the final states as they are, one per decoder layer (Ld = L*D, Hd = H):
  decoder layer k starts from ``h_n[k]`` in PyTorch's order (l0 fwd, l0 bwd, l1 fwd, ...), as
  ``h0 = h_n.view(L * D, B, H)`` hands them (a one-layer bidirectional encoder: decoder layer 0 from
  the forward state, layer 1 from the backward one); likewise ``c_n``.

One-value bridges (any Ld, any Hd = ``decoder_hidden_size``): one value s [B, Hd] is every decoder
layer's h0; an LSTM's c0 is s again (``bridge_cell="hidden"``, JoeyNMT) or zeros (``"zeros"``):

- ``"mean"``:       ``s = act(bridge(mean_j m_j))``, the mean of the memory m [B, S, M] over each
  source's own positions j < src_length (Bahdanau et al. 2015, Nematus; ``bridge.weight`` [Hd, M]);
- ``"top_linear"``: ``s = act(bridge([h_fwd; h_bwd]))`` of the top encoder layer (JoeyNMT
  ``init_hidden: bridge``; ``bridge.weight`` [Hd, D*H]);
- ``"last"``:       ``s = h_fwd`` of the top encoder layer (JoeyNMT ``init_hidden: last``; Hd = H);
- ``"zeros"``:      h0 = c0 = 0.

Weights (PyTorch ``state_dict`` names and shapes)::

    encoder.embedding.weight                         [Vs, Es]
    encoder.rnn.weight_ih_l{k}[_reverse]             [G*H, Es (k = 0) or D*H]
    encoder.rnn.weight_hh_l{k}[_reverse]             [G*H, H]
    encoder.rnn.bias_ih_l{k}[_reverse], bias_hh_...  [G*H]
    bridge.weight [H, 2H], bridge.bias [H]           (bidirectional, bridge="linear")
    bridge_c.weight [H, 2H], bridge_c.bias [H]       (... and cell="lstm")
    bridge.weight [Hd, M or D*H], bridge.bias [Hd]   (bridge="mean" or "top_linear")
    bridge.weight [L*H, L*H], bridge.bias [L*H]      (bridge="layer_mix"; LSTM: bridge_c.* too)
    decoder.embedding.weight                         [Vt, Et]
    decoder.rnn.weight_ih_l{k}                       [G*Hd, decoder input size (k = 0) or Hd]
    decoder.rnn.weight_hh_l{k}                       [G*Hd, Hd]
    decoder.rnn.bias_ih_l{k}, bias_hh_l{k}           [G*Hd]
    decoder.out.weight [Vt, Ho], decoder.out.bias [Vt]   (Ho: what the architecture projects;
                                                         output_layer="linear")
  output_layer="mlp" (out(act(out_hidden(x))), act: ``output_activation``; "leaky_relu" with
  ``output_negative_slope`` a in [0, 1)), Ho -> K -> Vt:
    decoder.out_hidden.weight [K, Ho], .bias [K];  decoder.out.weight [Vt, K], .bias [Vt]
  output_layer="maxout" (Goodfellow et al.; Bahdanau et al.'s readout, pool 2), Ho -> 2K -> K -> Vt:
    decoder.maxout.weight [2K, Ho], .bias [2K] (unit k = max of rows 2k and 2k+1);
    decoder.out.weight [Vt, K], .bias [Vt]           (K: ``output_hidden_dim``)

Padding: ``pad_id`` is a target id (in [0, Vt)); a source is filled past its length with
``src_pad_id`` (in [0, Vs); None: ``pad_id`` when it is a source id, else 0), which the encoder's
packed-sequence masking never reads past the embedding lookup.

Decoding rules recorded from the toolkit that trained the model (importers set them; every decoding
path reads them as the defaults of the decoding options of the same names,
:func:`seqjit.decoding.inputs.resolve_rules`):

- ``suppress_tokens``: token ids the toolkit never generates besides the pad token (JoeyNMT bans
  ``<s>`` at every step: its importer records ``[decoder_start_id]``); None: none;
- ``suppress_pad_token``: whether the toolkit bans the pad token (True: seqjit's rule and JoeyNMT's;
  OpenNMT-py's searches allow it: its importer records False).

Decoder state (``decoder_state_specs``): ``h.{l}`` [B, Hd] per layer (and ``c.{l}`` for an LSTM),
zeros before step 0; the encoder graph outputs the bridged initial states (:func:`init_sources`:
``init.h.{l}``/``init.c.{l}`` per layer, or one ``init.h`` for a one-value bridge), which the step
graph takes at step 0 in place of the state; a state whose initial value is zero has no source
(the zeros it holds before step 0 are its initial value).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqjit.errors import ConfigError
from seqjit.graph.ops import TensorSpec
from seqjit.models.config import ModelConfig, choice, positive
from seqjit.models.quantization import ARITHMETICS, SCHEMES

GATES = {"gru": 3, "lstm": 4}
PER_LAYER_BRIDGES = ("sum", "concat", "linear", "layer_mix", "stack")
#: per-layer bridges whose decoder layer l reads [h_fwd; h_bwd] (Hd = 2H) of a bidirectional encoder
_CONCAT_LAYOUT = ("concat", "layer_mix")
ONE_VALUE_BRIDGES = ("mean", "top_linear", "last", "zeros")


@dataclass
class RNNConfig(ModelConfig):
    """Fields shared by the RNN architectures (see the module docstring)."""

    src_vocab_size: int
    tgt_vocab_size: int
    hidden_size: int
    embed_dim: int | None = None  # Es; None: hidden_size
    tgt_embed_dim: int | None = None  # Et; None: embed_dim
    cell: str = choice("gru", ("gru", "lstm"))
    num_layers: int = 1
    bidirectional: bool = False
    bridge: str = choice("sum", PER_LAYER_BRIDGES + ONE_VALUE_BRIDGES)
    bridge_activation: str | None = choice(None, (None, "tanh", "relu"))  # "linear", "mean", "top_linear", "layer_mix"
    bridge_cell: str | None = choice(None, (None, "hidden", "zeros"))  # an LSTM's c0 under a one-value bridge; None: "hidden"
    decoder_layers: int | None = None  # Ld; None: num_layers (a per-layer bridge needs Ld = L)
    decoder_hidden_size: int | None = None  # Hd; None: 2H for bridge "concat" of a bidirectional encoder, else H
    output_layer: str = choice("linear", ("linear", "mlp", "maxout"))
    output_hidden_dim: int | None = None  # K of the "mlp" / "maxout" output layer
    output_activation: str = choice("tanh", ("tanh", "relu", "gelu", "leaky_relu"))  # "mlp" only
    output_negative_slope: float = 0.01  # "leaky_relu": max(x, 0) + slope * min(x, 0)
    decoder_input_activation: str | None = choice(None, (None, "relu"))  # the tutorial's DecoderRNN: "relu"
    output_log_softmax: bool = False  # logits are log-probabilities (the tutorial's decoders)
    pad_id: int = 0  # the target side's padding token (never generated)
    src_pad_id: int | None = None  # fills a source past its length; None: pad_id if a source id, else 0
    decoder_start_id: int = 1
    eos_id: int = 2
    dtype: str = choice("float32", ("float32", "float64"))
    quantization: str = choice("none", SCHEMES)  # "int8", "float16", "bfloat16": seqjit.models.quantization
    arithmetic: str = choice("float32", ARITHMETICS)  # "bfloat16": bf16 products (bfloat16 weights only)
    suppress_tokens: list | None = None  # recorded from the toolkit (module docstring): ids it never generates
    suppress_pad_token: bool = True  # recorded from the toolkit: whether it bans the pad token

    # -- derived sizes ---------------------------------------------------------------------------
    @property
    def src_embed(self) -> int:
        return self.embed_dim if self.embed_dim is not None else self.hidden_size

    @property
    def tgt_embed(self) -> int:
        return self.tgt_embed_dim if self.tgt_embed_dim is not None else self.src_embed

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def decoder_hidden(self) -> int:
        if self.decoder_hidden_size is not None:
            return self.decoder_hidden_size
        return 2 * self.hidden_size if self.bidirectional and self.bridge in _CONCAT_LAYOUT else self.hidden_size

    @property
    def dec_layers(self) -> int:
        return self.decoder_layers if self.decoder_layers is not None else self.num_layers

    @property
    def memory_dim(self) -> int:
        """M, the width of the memory the decoder reads (here every direction's output, D*H)."""
        return self.directions * self.hidden_size

    @property
    def bridge_input(self) -> int | None:
        """The input width of ``bridge.weight`` (None: no such weight)."""
        if self.bridge == "mean":
            return self.memory_dim
        if self.bridge == "top_linear":
            return self.directions * self.hidden_size
        return 2 * self.hidden_size if self.bridge == "linear" and self.bidirectional else None

    @property
    def gates(self) -> int:
        return GATES[self.cell]

    def validate(self, where: str = "config") -> None:
        positive(where, src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size,
                 hidden_size=self.hidden_size, num_layers=self.num_layers)
        for key in ("embed_dim", "tgt_embed_dim"):
            if getattr(self, key) is not None:
                positive(where, **{key: getattr(self, key)})
        for key in ("decoder_layers", "decoder_hidden_size", "output_hidden_dim"):
            if getattr(self, key) is not None:
                positive(where, **{key: getattr(self, key)})
        if not self.bidirectional and self.bridge in ("concat", "linear"):
            raise ConfigError(f"{where}: bridge {self.bridge!r} combines the two directions of a bidirectional "
                              "encoder; set bidirectional=True or use bridge 'sum', 'mean', 'top_linear', 'last' "
                              "or 'zeros'")
        self._validate_bridge(where)
        self._validate_output(where)
        if self.quantization != "none" and self.dtype != "float32":
            raise ConfigError(f"{where}: quantization {self.quantization!r} needs dtype float32, got {self.dtype}")
        if self.arithmetic != "float32" and self.quantization != "bfloat16":
            raise ConfigError(f"{where}: arithmetic {self.arithmetic!r} needs quantization 'bfloat16', got "
                              f"{self.quantization!r}")
        if self.bridge_activation is not None and self.bridge not in ("linear", "mean", "top_linear", "layer_mix"):
            raise ConfigError(f"{where}: bridge_activation applies to bridge 'linear', 'mean', 'top_linear' or "
                              f"'layer_mix', got bridge {self.bridge!r}")
        for key in ("pad_id", "decoder_start_id", "eos_id"):
            value = getattr(self, key)
            if not 0 <= value < self.tgt_vocab_size:
                raise ConfigError(f"{where}: {key} {value} is outside the target vocabulary [0, {self.tgt_vocab_size})")
        if self.src_pad_id is not None and not 0 <= self.src_pad_id < self.src_vocab_size:
            raise ConfigError(f"{where}: src_pad_id {self.src_pad_id} is outside the source vocabulary "
                              f"[0, {self.src_vocab_size})")
        if self.suppress_tokens is not None:
            tokens = self.suppress_tokens
            if not isinstance(tokens, list) or len(tokens) > self.tgt_vocab_size or not all(
                    isinstance(t, int) and not isinstance(t, bool) and 0 <= t < self.tgt_vocab_size for t in tokens):
                raise ConfigError(f"{where}: 'suppress_tokens' must be a list of token ids in [0, "
                                  f"{self.tgt_vocab_size}), got {str(tokens)[:60]}")

    def _validate_bridge(self, where: str) -> None:
        if self.bridge == "stack" and self.dec_layers != self.num_layers * self.directions:
            raise ConfigError(f"{where}: bridge 'stack' hands each of the encoder's {self.num_layers * self.directions} "
                              f"final states (layers x directions) to one decoder layer, so decoder_layers must be "
                              f"{self.num_layers * self.directions}, got {self.dec_layers}")
        if self.bridge in PER_LAYER_BRIDGES:
            if self.dec_layers != self.num_layers and self.bridge != "stack":
                raise ConfigError(f"{where}: bridge {self.bridge!r} hands encoder layer l to decoder layer l, so "
                                  f"decoder_layers ({self.dec_layers}) must equal num_layers ({self.num_layers}); "
                                  "use a one-value bridge ('mean', 'top_linear', 'last', 'zeros') otherwise")
            derived = 2 * self.hidden_size if self.bidirectional and self.bridge in _CONCAT_LAYOUT else self.hidden_size
            if self.decoder_hidden_size not in (None, derived):
                raise ConfigError(f"{where}: bridge {self.bridge!r} fixes the decoder hidden size at {derived}, got "
                                  f"decoder_hidden_size {self.decoder_hidden_size}; use bridge 'mean', 'top_linear' "
                                  "or 'zeros' for another width")
            if self.bridge_cell is not None:
                raise ConfigError(f"{where}: bridge_cell applies to the one-value bridges ('mean', 'top_linear', "
                                  f"'last'), not to bridge {self.bridge!r} (an LSTM's c0 comes from the encoder's c_n)")
        elif self.bridge == "last" and self.decoder_hidden != self.hidden_size:
            raise ConfigError(f"{where}: bridge 'last' hands the top encoder layer's forward state ({self.hidden_size}) "
                              f"to the decoder, so decoder_hidden_size must be {self.hidden_size}, got {self.decoder_hidden}")
        if self.bridge_cell is not None and self.cell != "lstm":
            raise ConfigError(f"{where}: bridge_cell sets an LSTM's initial cell state; cell is {self.cell!r}")

    def _validate_output(self, where: str) -> None:
        if self.output_layer == "linear":
            if self.output_hidden_dim is not None:
                raise ConfigError(f"{where}: output_hidden_dim applies to output_layer 'mlp' or 'maxout', "
                                  "got output_layer 'linear'")
            return
        if self.output_hidden_dim is None:
            raise ConfigError(f"{where}: output_layer {self.output_layer!r} needs output_hidden_dim (its K units)")
        if not 0.0 <= self.output_negative_slope < 1.0:
            raise ConfigError(f"{where}: 'output_negative_slope' must be in [0, 1), got {self.output_negative_slope}")
        if self.output_layer == "maxout" and self.quantization != "none":
            raise ConfigError(f"{where}: output_layer 'maxout' has no quantized form (quantization "
                              f"{self.quantization!r}); quantize a model with output_layer 'linear' or 'mlp'")

    @property
    def initial_state_zero(self) -> bool:
        """Whether some decoder state starts at zero (then teacher forcing steps: see :func:`init_sources`)."""
        return self.bridge == "zeros" or (self.cell == "lstm" and self.bridge in ONE_VALUE_BRIDGES
                                          and self.bridge_cell == "zeros")


def rnn_keys(layers: int, directions: int) -> list:
    """The ``nn.GRU``/``nn.LSTM`` state_dict keys, in order."""
    keys = []
    for k in range(layers):
        for d in range(directions):
            sfx = f"_l{k}" + ("_reverse" if d else "")
            keys += [f"weight_ih{sfx}", f"weight_hh{sfx}", f"bias_ih{sfx}", f"bias_hh{sfx}"]
    return keys


def add_rnn(spec: dict, prefix: str, c: RNNConfig, input_size: int, hidden: int, directions: int,
            layers: int | None = None) -> None:
    dt, g = np.dtype(c.dtype), c.gates
    for key in rnn_keys(c.num_layers if layers is None else layers, directions):
        layer_in = input_size if "_l0" in key else directions * hidden
        if key.startswith("weight_ih"):
            shape = (g * hidden, layer_in)
        elif key.startswith("weight_hh"):
            shape = (g * hidden, hidden)
        else:
            shape = (g * hidden,)
        spec[f"{prefix}.{key}"] = TensorSpec(shape, dt)


def encoder_spec(c: RNNConfig) -> dict:
    """Embedding, encoder RNN and bridge weights."""
    dt, H = np.dtype(c.dtype), c.hidden_size
    spec = {"encoder.embedding.weight": TensorSpec((c.src_vocab_size, c.src_embed), dt)}
    add_rnn(spec, "encoder.rnn", c, c.src_embed, H, c.directions)
    if c.bidirectional and c.bridge == "linear":
        for name in ("bridge", "bridge_c") if c.cell == "lstm" else ("bridge",):
            spec[f"{name}.weight"] = TensorSpec((H, 2 * H), dt)
            spec[f"{name}.bias"] = TensorSpec((H,), dt)
    elif c.bridge == "layer_mix":
        LH = c.num_layers * H
        for name in ("bridge", "bridge_c") if c.cell == "lstm" else ("bridge",):
            spec[f"{name}.weight"] = TensorSpec((LH, LH), dt)
            spec[f"{name}.bias"] = TensorSpec((LH,), dt)
    elif c.bridge in ("mean", "top_linear"):
        spec["bridge.weight"] = TensorSpec((c.decoder_hidden, c.bridge_input), dt)
        spec["bridge.bias"] = TensorSpec((c.decoder_hidden,), dt)
    return spec


def decoder_spec(c: RNNConfig, input_size: int, out_features: int) -> dict:
    """Target embedding, decoder RNN (first-layer input ``input_size``) and the output projection
    from ``out_features``."""
    dt, Hd = np.dtype(c.dtype), c.decoder_hidden
    spec = {"decoder.embedding.weight": TensorSpec((c.tgt_vocab_size, c.tgt_embed), dt)}
    add_rnn(spec, "decoder.rnn", c, input_size, Hd, 1, c.dec_layers)
    if c.output_layer != "linear":
        K = c.output_hidden_dim
        name, rows = ("decoder.out_hidden", K) if c.output_layer == "mlp" else ("decoder.maxout", 2 * K)
        spec[f"{name}.weight"] = TensorSpec((rows, out_features), dt)
        spec[f"{name}.bias"] = TensorSpec((rows,), dt)
        out_features = K
    spec["decoder.out.weight"] = TensorSpec((c.tgt_vocab_size, out_features), dt)
    spec["decoder.out.bias"] = TensorSpec((c.tgt_vocab_size,), dt)
    return spec


def state_names(c: RNNConfig) -> list:
    """Decoder state names: ``h.{l}`` (and ``c.{l}`` for an LSTM)."""
    kinds = ("h", "c") if c.cell == "lstm" else ("h",)
    return [f"{kind}.{l}" for kind in kinds for l in range(c.dec_layers)]


def init_sources(c: RNNConfig) -> dict:
    """Decoder state name -> the encoder output holding its initial value, or None (zeros)."""
    sources = {}
    for name in state_names(c):
        if c.bridge in PER_LAYER_BRIDGES:
            sources[name] = f"init.{name}"
        elif c.bridge == "zeros" or (name.startswith("c.") and c.bridge_cell == "zeros"):
            sources[name] = None
        else:
            sources[name] = "init.h"
    return sources


def state_specs(c: RNNConfig, batch: int) -> dict:
    dt = np.dtype(c.dtype)
    return {name: TensorSpec((batch, c.decoder_hidden), dt) for name in state_names(c)}
