"""What the two RNN architectures (``rnn_seq2seq``, ``attention_seq2seq``) share: the config
fields, the weight layout of the embeddings, encoder, bridge and decoder RNN, and the decoder-state
specs. Graph pieces are in :mod:`seqjit.models.rnn_graphs`.

Sizes: Vs/Vt source/target vocabulary, Es/Et embedding dims, H encoder hidden size per direction,
D directions (2 when ``bidirectional``), L ``num_layers`` (encoder and decoder alike), G gates (3 GRU,
4 LSTM), Hd the decoder hidden size (2H when a bidirectional encoder uses ``bridge="concat"``, else H).

Encoder: ``nn.Embedding`` -> ``nn.GRU``/``nn.LSTM`` (batch-first, L layers, D directions; padded rows
run with packed-sequence semantics). Its final state initialises the decoder, layer by layer. With a
bidirectional encoder, layer l's forward and backward final states (``h_n[2l]``, ``h_n[2l+1]``, and
likewise ``c_n``) are combined by ``bridge``:

- ``"sum"``:    ``h0[l] = h_fwd + h_bwd`` (Hd = H);
- ``"concat"``: ``h0[l] = [h_fwd; h_bwd]`` (Hd = 2H; OpenNMT's layout for bidirectional encoders);
- ``"linear"``: ``h0[l] = act(bridge([h_fwd; h_bwd]))`` with one ``nn.Linear(2H, H)`` shared by the
  layers (``act``: ``bridge_activation``, None or "tanh"); an LSTM's cell state goes through its own
  ``bridge_c`` linear.

Weights (PyTorch ``state_dict`` names and shapes)::

    encoder.embedding.weight                         [Vs, Es]
    encoder.rnn.weight_ih_l{k}[_reverse]             [G*H, Es (k = 0) or D*H]
    encoder.rnn.weight_hh_l{k}[_reverse]             [G*H, H]
    encoder.rnn.bias_ih_l{k}[_reverse], bias_hh_...  [G*H]
    bridge.weight [H, 2H], bridge.bias [H]           (bidirectional, bridge="linear")
    bridge_c.weight [H, 2H], bridge_c.bias [H]       (... and cell="lstm")
    decoder.embedding.weight                         [Vt, Et]
    decoder.rnn.weight_ih_l{k}                       [G*Hd, decoder input size (k = 0) or Hd]
    decoder.rnn.weight_hh_l{k}                       [G*Hd, Hd]
    decoder.rnn.bias_ih_l{k}, bias_hh_l{k}           [G*Hd]
    decoder.out.weight [Vt, Ho], decoder.out.bias [Vt]   (Ho: what the architecture projects)

Decoder state (``decoder_state_specs``): ``h.{l}`` [B, Hd] per layer (and ``c.{l}`` for an LSTM),
zeros before step 0; the encoder graph outputs the bridged initial state as ``init.h.{l}``
(``init.c.{l}``), which the step graph takes at step 0 in place of ``h.{l}``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqjit.errors import ConfigError
from seqjit.graph.ops import TensorSpec
from seqjit.models.config import ModelConfig, choice, positive
from seqjit.models.quantization import SCHEMES

GATES = {"gru": 3, "lstm": 4}


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
    bridge: str = choice("sum", ("sum", "concat", "linear"))
    bridge_activation: str | None = choice(None, (None, "tanh"))
    decoder_input_activation: str | None = choice(None, (None, "relu"))  # the tutorial's DecoderRNN: "relu"
    output_log_softmax: bool = False  # logits are log-probabilities (the tutorial's decoders)
    pad_id: int = 0
    decoder_start_id: int = 1
    eos_id: int = 2
    dtype: str = choice("float32", ("float32", "float64"))
    quantization: str = choice("none", SCHEMES)  # "int8": see seqjit.models.quantization

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
        return 2 * self.hidden_size if self.bidirectional and self.bridge == "concat" else self.hidden_size

    @property
    def gates(self) -> int:
        return GATES[self.cell]

    def validate(self, where: str = "config") -> None:
        positive(where, src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size,
                 hidden_size=self.hidden_size, num_layers=self.num_layers)
        for key in ("embed_dim", "tgt_embed_dim"):
            if getattr(self, key) is not None:
                positive(where, **{key: getattr(self, key)})
        if not self.bidirectional and self.bridge != "sum":
            raise ConfigError(f"{where}: bridge {self.bridge!r} combines the two directions of a bidirectional "
                              "encoder; set bidirectional=True or leave bridge at 'sum'")
        if self.quantization != "none" and self.dtype != "float32":
            raise ConfigError(f"{where}: quantization {self.quantization!r} needs dtype float32, got {self.dtype}")
        if self.bridge_activation is not None and self.bridge != "linear":
            raise ConfigError(f"{where}: bridge_activation applies to bridge='linear' only, got bridge {self.bridge!r}")
        for key in ("pad_id", "decoder_start_id", "eos_id"):
            value = getattr(self, key)
            if not 0 <= value < self.tgt_vocab_size:
                raise ConfigError(f"{where}: {key} {value} is outside the target vocabulary [0, {self.tgt_vocab_size})")


def rnn_keys(layers: int, directions: int) -> list:
    """The ``nn.GRU``/``nn.LSTM`` state_dict keys, in order."""
    keys = []
    for k in range(layers):
        for d in range(directions):
            sfx = f"_l{k}" + ("_reverse" if d else "")
            keys += [f"weight_ih{sfx}", f"weight_hh{sfx}", f"bias_ih{sfx}", f"bias_hh{sfx}"]
    return keys


def add_rnn(spec: dict, prefix: str, c: RNNConfig, input_size: int, hidden: int, directions: int) -> None:
    dt, g = np.dtype(c.dtype), c.gates
    for key in rnn_keys(c.num_layers, directions):
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
    return spec


def decoder_spec(c: RNNConfig, input_size: int, out_features: int) -> dict:
    """Target embedding, decoder RNN (first-layer input ``input_size``) and the output projection
    from ``out_features``."""
    dt, Hd = np.dtype(c.dtype), c.decoder_hidden
    spec = {"decoder.embedding.weight": TensorSpec((c.tgt_vocab_size, c.tgt_embed), dt)}
    add_rnn(spec, "decoder.rnn", c, input_size, Hd, 1)
    spec["decoder.out.weight"] = TensorSpec((c.tgt_vocab_size, out_features), dt)
    spec["decoder.out.bias"] = TensorSpec((c.tgt_vocab_size,), dt)
    return spec


def state_names(c: RNNConfig) -> list:
    """Decoder state names: ``h.{l}`` (and ``c.{l}`` for an LSTM)."""
    kinds = ("h", "c") if c.cell == "lstm" else ("h",)
    return [f"{kind}.{l}" for kind in kinds for l in range(c.num_layers)]


def state_specs(c: RNNConfig, batch: int) -> dict:
    dt = np.dtype(c.dtype)
    return {name: TensorSpec((batch, c.decoder_hidden), dt) for name in state_names(c)}
