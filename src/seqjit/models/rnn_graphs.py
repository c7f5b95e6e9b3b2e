"""Graph pieces shared by the RNN architectures (weights and sizes: :mod:`seqjit.models.rnn_common`).

Shapes: B batch, S source length, T target length, H encoder hidden per direction, D directions,
L layers, Hd decoder hidden, Et target embedding dim, V target vocabulary.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph import GraphBuilder
from seqjit.models import rnn_int8_graphs as int8
from seqjit.models.base import LOGITS, NEXT, PREV_TOKENS, SRC_IDS, SRC_LENGTHS, STEP
from seqjit.models.quantization import linear
from seqjit.models.rnn_common import PER_LAYER_BRIDGES, RNNConfig, init_sources, rnn_keys, state_names


class RNNPieces:
    """Builds the shared parts of the encoder, decoder-step and full-sequence decoder graphs."""

    def __init__(self, g: GraphBuilder, config: RNNConfig, weights: dict):
        self.g, self.c, self.weights = g, config, weights

    def w(self, name: str) -> str:
        return self.g.constant(name, self.weights[name])

    # -- encoder -----------------------------------------------------------------------------------
    def rnn(self, x, prefix: str, directions: int, *, layers: int, h0=None, c0=None, lengths=None, name: str):
        """A batch-first ``nn.GRU``/``nn.LSTM`` of ``layers`` layers over ``x`` [B, T, I]: returns
        ``(output [B, T, D*H], h_n [layers*D, B, H], c_n or None)``."""
        if int8.is_int8(self.weights, prefix):  # the encoder's (no h0/c0): decoder_sequence has its own below
            return int8.sequence(self.g, self.weights, self.c.cell, layers, x, prefix, directions,
                                 lengths=lengths, name=name)
        keys = rnn_keys(layers, directions)
        weights = [self.w(f"{prefix}.{k}") for k in keys]
        if self.c.cell == "gru":
            out, h_n = self.g.op("gru", x, h0, lengths, *weights, keys=tuple(keys), batch_first=True, outputs=2, name=name)
            return out, h_n, None
        return (*self.g.op("lstm", x, h0, c0, lengths, *weights, keys=tuple(keys), batch_first=True, outputs=3,
                           name=name),)

    def encoder_rnn(self):
        """src_ids [B, S], src_lengths [B] -> (output [B, S, D*H], h_n, c_n or None [L*D, B, H], lengths)."""
        g, c = self.g, self.c
        ids = g.input(SRC_IDS, dtype="int", ndim=2)
        lengths = g.input(SRC_LENGTHS, dtype="int", ndim=1)
        x = g.op("embedding", ids, self.w("encoder.embedding.weight"), name="encoder.embed")
        out, h_n, c_n = self.rnn(x, "encoder.rnn", c.directions, layers=c.num_layers, lengths=lengths,
                                 name="encoder.rnn")
        return out, h_n, c_n, lengths

    def output_initial_states(self, memory, h_n, c_n, lengths) -> None:
        """The encoder graph's ``init.*`` outputs (see ``rnn_common.init_sources``) from the memory
        [B, S, M] and the final states."""
        c = self.c
        if c.bridge in PER_LAYER_BRIDGES:
            for kind, values in (("h", self.bridge(h_n, "h", "bridge")),
                                 ("c", self.bridge(c_n, "c", "bridge_c") if c_n is not None else [])):
                for l, value in enumerate(values):
                    self.g.output(value, name=f"init.{kind}.{l}")
        elif c.bridge != "zeros":
            self.g.output(self.one_value_bridge(memory, h_n, lengths), name="init.h")

    def one_value_bridge(self, memory, h_n, lengths):
        """The one initial value [B, Hd] of bridge "mean", "top_linear" or "last"."""
        g, c = self.g, self.c
        H, D, L = c.hidden_size, c.directions, c.num_layers
        if c.bridge == "mean":
            x = self.masked_mean(memory, lengths)
        else:
            rows = g.op("transpose", h_n, axes=(1, 0, 2), name="encoder.final_h")  # [B, L*D, H]
            flat = g.op("reshape", rows, shape=(0, -1))  # [B, L*D*H]
            x = g.op("slice_last", flat, start=(L - 1) * D * H, stop=L * D * H if c.bridge == "top_linear" else
                     (L - 1) * D * H + H, name="encoder.top_final_h")  # [fwd; bwd] or fwd
            if c.bridge == "last":
                return x
        return linear(self.g, x, self.weights, "bridge.weight", self.w("bridge.bias"), config=c,
                      activation=c.bridge_activation,
                      name="bridge")

    def masked_mean(self, memory, lengths):
        """The mean of memory [B, S, M] over each row's positions j < lengths[b] -> [B, M]: attention
        of a zero query scores every position 0, so it weighs the positions j < lengths[b] equally
        (1/length each) and the padded ones not at all; the existing (native) attention kernel
        computes it. The zero query is a zero-weight linear of m_0 (finite: an RNN's output)."""
        g, M = self.g, self.c.memory_dim
        values = g.op("reshape", memory, shape=(0, 1, -1, M), name="bridge.mean_values")  # [B, 1, S, M]
        first = g.op("slice_last", g.op("reshape", memory, shape=(0, -1)), start=0, stop=M)  # m_0 [B, M]
        zeros = g.constant("bridge.mean_query.weight", np.zeros((M, M), np.dtype(self.c.dtype)))
        query = g.op("reshape", g.op("linear", first, zeros, None, name="bridge.mean_query"), shape=(0, 1, 1, M))
        mean = g.op("attention", query, values, values, lengths, scale=1.0, name="bridge.mean")  # [B, 1, 1, M]
        return g.op("reshape", mean, shape=(0, M), name="bridge.mean_memory")

    def bridge(self, state, kind: str, prefix: str) -> list:
        """Final states [L*D, B, H] -> the decoder's initial state per layer [B, Hd] (per-layer bridges)."""
        g, c = self.g, self.c
        H, D = c.hidden_size, c.directions
        rows = g.op("transpose", state, axes=(1, 0, 2), name=f"encoder.final_{kind}")  # [B, L*D, H]
        flat = g.op("reshape", rows, shape=(0, -1))  # [B, L*D*H]
        if c.bridge == "layer_mix":
            return self.layer_mix(flat, prefix)
        if c.bridge == "stack":  # decoder layer k <- h_n[k] (rnn_common: IndicXlit)
            return [g.op("slice_last", flat, start=k * H, stop=(k + 1) * H) for k in range(c.num_layers * D)]
        layers = []
        for l in range(c.num_layers):
            if D == 1:
                layers.append(g.op("slice_last", flat, start=l * H, stop=(l + 1) * H))
                continue
            both = g.op("slice_last", flat, start=2 * l * H, stop=(2 * l + 2) * H)  # [h_fwd; h_bwd]
            if c.bridge == "concat":
                layers.append(both)
            elif c.bridge == "linear":
                layers.append(linear(g, both, self.weights, f"{prefix}.weight", self.w(f"{prefix}.bias"),
                                     config=c, activation=c.bridge_activation, name=f"{prefix}.{l}"))
            else:
                fwd = g.op("slice_last", both, start=0, stop=H)
                bwd = g.op("slice_last", both, start=H, stop=2 * H)
                layers.append(g.op("add", fwd, bwd, name=f"bridge.{kind}.{l}"))
        return layers

    def layer_mix(self, flat, prefix: str) -> list:
        """OpenNMT-py's ``-bridge`` (``rnn_common``: "layer_mix") on the flattened final states
        [B, L*D*H] -> decoder layer l's initial state [B, D*H]."""
        g, c = self.g, self.c
        LH, DH = c.num_layers * c.hidden_size, c.directions * c.hidden_size
        pieces = [linear(g, g.op("slice_last", flat, start=r * LH, stop=(r + 1) * LH), self.weights,
                         f"{prefix}.weight", self.w(f"{prefix}.bias"), config=c, activation=c.bridge_activation,
                         name=f"{prefix}.piece{r}") for r in range(c.directions)]
        mixed = pieces[0] if len(pieces) == 1 else g.op("concat", *pieces, axis=-1, name=f"{prefix}.mixed")
        if c.num_layers == 1:
            return [mixed]
        return [g.op("slice_last", mixed, start=l * DH, stop=(l + 1) * DH) for l in range(c.num_layers)]

    # -- decoder -----------------------------------------------------------------------------------
    def initial_state_inputs(self) -> dict:
        """Decoder state name -> its initial value: a graph input (``init.h.{l}``, ``init.h``...) or
        None where it starts at zero (``rnn_common.init_sources``)."""
        inputs, out = {}, {}
        for name, source in init_sources(self.c).items():
            if source is not None and source not in inputs:
                inputs[source] = self.g.input(source, dtype="float", ndim=2)
            out[name] = inputs.get(source)
        return out

    def embed_target(self, ids):
        """Target token embedding ([B] -> [B, Et] or [B, T] -> [B, T, Et]), then the optional ReLU."""
        x = self.g.op("embedding", ids, self.w("decoder.embedding.weight"), name="decoder.embed")
        if self.c.decoder_input_activation == "relu":
            x = self.g.op("relu", x, name="decoder.embed_relu")
        return x

    def step_states(self):
        """Step-graph inputs: ``(prev_tokens, step, src_lengths, states)`` where ``states`` maps each
        decoder state name to its value for this step (the encoder's ``init.*`` at step 0)."""
        g = self.g
        tokens = g.input(PREV_TOKENS, dtype="int", ndim=1)
        step = g.input(STEP, dtype="int", ndim=0)
        src_lengths = g.input(SRC_LENGTHS, dtype="int", ndim=1)
        init = self.initial_state_inputs()
        states = {}
        for n in state_names(self.c):
            current = g.input(n, dtype="float", ndim=2)
            states[n] = current if init[n] is None else g.op("select_first_step", step, init[n], current,
                                                             name=f"decoder.prev_{n}")
        return tokens, step, src_lengths, states

    def cell_stack(self, x, states: dict):
        """One decoder step through the L cells: x [B, I] -> (top hidden [B, Hd], new states by name)."""
        g, c = self.g, self.c
        if int8.is_int8(self.weights, "decoder.rnn"):
            return int8.cell_stack(g, self.weights, c, x, states)
        new = {}
        for l in range(c.dec_layers):
            p, sfx = "decoder.rnn", f"_l{l}"
            ws = [self.w(f"{p}.{k}{sfx}") for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            if c.cell == "gru":
                x = new[f"h.{l}"] = g.op("gru_cell", x, states[f"h.{l}"], *ws, name=f"decoder.cell{l}")
            else:
                x, new[f"c.{l}"] = g.op("lstm_cell", x, states[f"h.{l}"], states[f"c.{l}"], *ws, outputs=2,
                                        name=f"decoder.cell{l}")
                new[f"h.{l}"] = x
        return x, new

    def output_next_states(self, new: dict) -> None:
        for n in state_names(self.c):
            self.g.output(new[n], name=NEXT + n)

    def decoder_sequence(self, x, init: dict):
        """Teacher forcing: the decoder RNN over x [B, T, I] from the initial states (``init``: state
        name -> value, none zero) -> [B, T, Hd]."""
        g, c = self.g, self.c
        if int8.is_int8(self.weights, "decoder.rnn"):
            return int8.decoder_sequence(g, self.weights, c, x, init)
        stacked = {kind: g.op("stack", *[init[f"{kind}.{l}"] for l in range(c.dec_layers)], axis=0,
                              name=f"decoder.{kind}0")
                   for kind in (("h", "c") if c.cell == "lstm" else ("h",))}
        out, _, _ = self.rnn(x, "decoder.rnn", 1, layers=c.dec_layers, h0=stacked["h"], c0=stacked.get("c"),
                             name="decoder.rnn")
        return out

    def logits(self, h) -> str:
        """The output layer on h [..., Ho] -> [..., V] (log-probabilities when configured)."""
        g, c = self.g, self.c
        if c.output_layer == "mlp" and c.output_activation == "leaky_relu":
            h = self.leaky_hidden(h)
        elif c.output_layer == "mlp":
            h = linear(g, h, self.weights, "decoder.out_hidden.weight", self.w("decoder.out_hidden.bias"),
                       config=c, activation=c.output_activation, name="decoder.out_hidden")
        elif c.output_layer == "maxout":
            h = self.maxout(h)
        y = linear(g, h, self.weights, "decoder.out.weight", self.w("decoder.out.bias"), config=self.c,
                   name="decoder.out")
        if self.c.output_log_softmax:
            y = g.op("log_softmax", y, name="decoder.log_softmax")
        return g.output(y, name=LOGITS)

    def leaky_hidden(self, h):
        """The MLP's hidden layer with LeakyReLU of slope a: leaky(y) = (1 - a) relu(y) + a y for
        y = W h + b, as two linears on scaled copies of W and b ((1 - a) relu(y) = relu((1 - a) y):
        a < 1) added, so only existing (native) ops run (W stays float32 in an int8 model)."""
        g, w, a = self.g, self.weights, float(self.c.output_negative_slope)
        W, b = w["decoder.out_hidden.weight"], w["decoder.out_hidden.bias"]
        parts = []
        for part, factor, act in (("relu", 1.0 - a, "relu"), ("linear", a, None)):
            name = f"decoder.out_hidden.{part}"
            weight = g.constant(f"{name}.weight", (W * np.asarray(factor, W.dtype)).astype(W.dtype))
            bias = g.constant(f"{name}.bias", (b * np.asarray(factor, b.dtype)).astype(b.dtype))
            parts.append(g.op("linear", h, weight, bias, activation=act, name=name))
        return g.op("add", *parts, name="decoder.out_hidden")

    def maxout(self, h):
        """Maxout with pools of 2 (units 2k, 2k+1 of ``decoder.maxout``): max(a, b) = b + relu(a - b),
        with a - b = (W_a - W_b) h + (b_a - b_b) one linear, so only existing (native) ops run."""
        g, w = self.g, self.weights
        W, b = w["decoder.maxout.weight"], w["decoder.maxout.bias"]
        second = g.op("linear", h, g.constant("decoder.maxout.odd.weight", np.ascontiguousarray(W[1::2])),
                      g.constant("decoder.maxout.odd.bias", np.ascontiguousarray(b[1::2])), name="decoder.maxout_b")
        diff = g.op("linear", h, g.constant("decoder.maxout.diff.weight", np.ascontiguousarray(W[0::2] - W[1::2])),
                    g.constant("decoder.maxout.diff.bias", np.ascontiguousarray(b[0::2] - b[1::2])),
                    activation="relu", name="decoder.maxout_gap")
        return g.op("add", second, diff, name="decoder.maxout")
