"""Attention RNN Seq2Seq: the decoder attends over every encoder output at each step.

Encoder, bridge, shared weights and sizes: :mod:`seqjit.models.rnn_common`. The memory is the
encoder output [B, S, M]: M = D*H, or H when a bidirectional encoder's two directions are summed
(``encoder_output="sum"``). Padded source positions (``t >= src_lengths[b]``) get no attention.

``attention="bahdanau"`` (additive; the PyTorch tutorial's ``AttnDecoderRNN`` +
``BahdanauAttention``), per step, with s = the top decoder layer's previous hidden state::

    e        = dropout(embedding(prev_token))                       [B, Et]   (dropout: identity)
    scores_j = Va . tanh(Wa s + Ua m_j)                             (Va's bias cancels in the softmax)
    a        = softmax(scores over j < src_length)                  [B, S]    -> ``attention``
    context  = sum_j a_j m_j                                        [B, M]
    h_l      = cell_l([e; context] for l = 0, else h_{l-1})         decoder RNN input Et + M
    logits   = out(h_{L-1})                                         [B, V]

``attention="dot"`` / ``"general"`` (Luong et al. 2015, global attention), computed after the RNN
step on its top output h (without ``input_feeding``, below, h~ is not fed to the next step)::

    h_l      = cell_l(e for l = 0, else h_{l-1});  h = h_{L-1}      decoder RNN input Et
    score_j  = h . m_j  (dot, needs Hd == M)   or   h . (Wa m_j + ba)  (general)
    a        = softmax(scores), context = sum_j a_j m_j             -> ``attention`` [B, S]
    h~       = tanh(concat([context; h]) + concat bias)            [B, Hd]   ([h; context] when
                                                                             concat_order="hidden_first")
    logits   = out(h~)                                              [B, V]

Weights, besides ``rnn_common``'s (A = ``attention_dim``, default Hd)::

    bahdanau: decoder.attention.Wa.weight [A, Hd], decoder.attention.Wa.bias [A],
              decoder.attention.Ua.weight [A, M],  decoder.attention.Ua.bias [A],
              decoder.attention.Va.weight [1, A];  decoder.rnn.weight_ih_l0 [G*Hd, Et + M]
    general:  decoder.attention.Wa.weight [Hd, M] (+ decoder.attention.Wa.bias [Hd] when attention_bias)
    concat:   decoder.attention.W.weight [A, Hd + M], decoder.attention.v.weight [1, A]
    "current": decoder.concat.weight [Ao, M + Hd] (+ decoder.concat.bias [Ao] when concat_bias)
    all:      decoder.out.weight [V, Ho], decoder.out.bias [V]  (Ho: Hd, or Ao with "current";
              plus M + Et with ``deep_output``; before it, the MLP or maxout layer of
              ``output_layer``: rnn_common)

``attention="concat"`` is Luong et al. 2015's third score, ``score_j = v . tanh(W [q; m_j])``: an
additive score without biases, run by the same kernel as Bahdanau's (W's memory columns applied to
the memory once per source, its query columns per step); its query is "current" by default,
"previous" allowed.

``attention_query_layers``: the query q is the top decoder layer's state (``"top"``), the sum of
every decoder layer's state (``"sum"``) or their concatenation (``"concat"``, width Qd = Ld * Hd:
the query widths above, Hd, become Qd); the previous states with ``"previous"``, the new ones with
``"current"`` (the attentional layer still reads the top state).

``deep_output`` (Bahdanau et al. 2015 appendix A, Nematus): the output layer reads
[x; context; e] (x: the new top state, or h~ with "current"; e: the embedding of the previous
token), so one linear over it is ``U_o s + C_o c + V_o E y``; ``output_layer="maxout"`` is
Bahdanau's readout, ``"mlp"`` with tanh Nematus'.

Where the query comes from (``attention_query``): ``"previous"`` is the Bahdanau step above (the
default of ``attention="bahdanau"``; additive kinds only); ``"current"`` is the Luong step above (the
default of dot/general) with any of the three scores, e.g. additive scoring of the new top state
feeding the attentional layer (OpenNMT-py ``global_attention: mlp``, JoeyNMT ``bahdanau``). With
``"current"``:

- ``attentional_dim`` Ao (default Hd): h~ = act(W_c [...] + b) is [B, Ao] (``decoder.concat.weight``
  [Ao, M + Hd]); the output layer reads h~; ``attentional_activation``: "tanh" or None (OpenNMT-py's
  ``mlp`` attention has no tanh);
- ``input_feeding`` (Luong et al. 2015 section 3.3; OpenNMT-py and JoeyNMT's default): the decoder
  RNN's input is [e; h~ of the previous step] (zeros at step 0), ``decoder.rnn.weight_ih_l0``
  [G*Hd, Et + Ao]; h~ is the decoder state ``feed`` [B, Ao];
- ``context_gate`` ("source", "target", "both"; Tu et al. 2017, OpenNMT-py ``-context_gate``): h~
  is replaced by the gate's output, read by the output layer and fed to the next step
  (:mod:`seqjit.models.rnn_context_gate`).

Encoder graph outputs: ``memory`` [B, S, M], ``keys`` [B, S, A] (bahdanau: ``Ua m + Ua.bias +
Wa.bias``, once per source; concat: W's memory columns times m) or [B, S, Qd] (general: ``Wa m +
ba``), and the initial states (``rnn_common.init_sources``). Luong (dot/general) models without
input feeding, with no zero initial state and a query from the top layer run teacher forcing in
one full-sequence graph (``decoder_full``); the others depend on the previous step, so their
:meth:`logits` steps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqjit.errors import ConfigError
from seqjit.graph import GraphBuilder
from seqjit.graph.ops import TensorSpec
from seqjit.models.base import ATTENTION, MEMORY, NEXT, SRC_LENGTHS, Seq2SeqModel
from seqjit.models.config import choice, positive
from seqjit.models.quantization import linear, quantized_spec
from seqjit.models.rnn_context_gate import KINDS as GATE_KINDS
from seqjit.models.rnn_context_gate import apply_gate, gate_spec
from seqjit.models.rnn_common import RNNConfig, decoder_spec, encoder_spec, state_specs
from seqjit.models.rnn_graphs import RNNPieces

KEYS = "keys"


@dataclass
class AttentionSeq2SeqConfig(RNNConfig):
    arch = "attention_seq2seq"

    attention: str = choice("bahdanau", ("bahdanau", "dot", "general", "concat"))
    attention_dim: int | None = None  # bahdanau / concat A; None: the decoder hidden size
    encoder_output: str = choice("concat", ("concat", "sum"))  # a bidirectional encoder's memory
    attention_bias: bool = False  # general: Wa has a bias
    concat_bias: bool = True  # luong: W_c has a bias
    concat_order: str = choice("context_first", ("context_first", "hidden_first"))
    attention_query: str | None = choice(None, (None, "previous", "current"))  # None: by attention kind
    input_feeding: bool = False  # "current": the previous h~ joins the next RNN input
    attentional_dim: int | None = None  # "current": Ao, the width of h~; None: Hd
    attentional_activation: str | None = choice("tanh", ("tanh", None))  # "current": h~ = act(W_c [...])
    attention_query_layers: str = choice("top", ("top", "sum", "concat"))  # the query: top layer, or every layer's
    deep_output: bool = False  # the output layer reads [h (or h~); context; embedding of the previous token]
    context_gate: str | None = choice(None, (None, *GATE_KINDS))  # "current": h~ through a context gate

    @property
    def memory_dim(self) -> int:
        return 2 * self.hidden_size if self.bidirectional and self.encoder_output == "concat" else self.hidden_size

    @property
    def attn_dim(self) -> int:
        return self.attention_dim if self.attention_dim is not None else self.decoder_hidden

    @property
    def query_dim(self) -> int:
        """Qd, the width of the attention query: Hd, or Ld * Hd for ``attention_query_layers="concat"``."""
        return self.decoder_hidden * (self.dec_layers if self.attention_query_layers == "concat" else 1)

    @property
    def additive(self) -> bool:
        """Whether the scores are additive, v . tanh(W q + U m) ("bahdanau", Luong's "concat")."""
        return self.attention in ("bahdanau", "concat")

    @property
    def query(self) -> str:
        """"previous" (context into the RNN input, output from the top state) or "current"."""
        if self.attention_query is not None:
            return self.attention_query
        return "previous" if self.attention == "bahdanau" else "current"  # Luong's kinds, "concat" too

    @property
    def attentional(self) -> int:
        """Ao, the width of the attentional vector h~ ("current")."""
        return self.attentional_dim if self.attentional_dim is not None else self.decoder_hidden

    def validate(self, where: str = "config") -> None:
        super().validate(where)
        for key in ("attention_dim", "attentional_dim"):
            if getattr(self, key) is not None:
                positive(where, **{key: getattr(self, key)})
        if self.encoder_output == "sum" and not self.bidirectional:
            raise ConfigError(f"{where}: encoder_output 'sum' adds the two directions of a bidirectional encoder; "
                              "set bidirectional=True or leave it at 'concat'")
        if self.attention == "dot" and self.memory_dim != self.query_dim:
            raise ConfigError(f"{where}: dot attention needs the memory size ({self.memory_dim}) to equal the query "
                              f"size ({self.query_dim}: the decoder hidden size, times decoder_layers with "
                              "attention_query_layers 'concat'); use attention='general' or change bridge/encoder_output")
        if self.attention != "general" and self.attention_bias:
            raise ConfigError(f"{where}: attention_bias applies to attention='general' only")
        if self.query == "previous":
            if not self.additive:
                raise ConfigError(f"{where}: attention_query 'previous' (the context fed into the RNN input) is "
                                  f"supported for attention='bahdanau' or 'concat' only, got attention {self.attention!r}")
            for key, default in (("input_feeding", False), ("attentional_dim", None), ("attentional_activation", "tanh"),
                                 ("context_gate", None)):
                if getattr(self, key) != default:
                    raise ConfigError(f"{where}: {key} applies to attention_query 'current' (an attentional layer "
                                      "after the step), not 'previous'")


class AttentionSeq2SeqModel(Seq2SeqModel):
    """See the module docstring."""

    arch = "attention_seq2seq"
    config_class = AttentionSeq2SeqConfig

    @classmethod
    def weight_spec(cls, config: AttentionSeq2SeqConfig) -> dict:
        return quantized_spec(cls._float_spec(config), config)

    @classmethod
    def _float_spec(cls, config: AttentionSeq2SeqConfig) -> dict:
        c = config
        dt, Hd, M, A, Ao, Qd = np.dtype(c.dtype), c.decoder_hidden, c.memory_dim, c.attn_dim, c.attentional, c.query_dim
        spec = encoder_spec(c)
        p = "decoder.attention"
        if c.attention == "bahdanau":
            spec.update({f"{p}.Wa.weight": TensorSpec((A, Qd), dt), f"{p}.Wa.bias": TensorSpec((A,), dt),
                         f"{p}.Ua.weight": TensorSpec((A, M), dt), f"{p}.Ua.bias": TensorSpec((A,), dt),
                         f"{p}.Va.weight": TensorSpec((1, A), dt)})
        elif c.attention == "concat":
            spec.update({f"{p}.W.weight": TensorSpec((A, Qd + M), dt), f"{p}.v.weight": TensorSpec((1, A), dt)})
        elif c.attention == "general":
            spec[f"{p}.Wa.weight"] = TensorSpec((Qd, M), dt)
            if c.attention_bias:
                spec[f"{p}.Wa.bias"] = TensorSpec((Qd,), dt)
        deep = M + c.tgt_embed if c.deep_output else 0  # the readout's context and embedding
        if c.query == "previous":
            spec.update(decoder_spec(c, c.tgt_embed + M, Hd + deep))
            return spec
        rnn_input = c.tgt_embed + (Ao if c.input_feeding else 0)
        spec.update(decoder_spec(c, rnn_input, Ao + deep))
        spec["decoder.concat.weight"] = TensorSpec((Ao, M + Hd), dt)
        if c.concat_bias:
            spec["decoder.concat.bias"] = TensorSpec((Ao,), dt)
        if c.context_gate is not None:
            spec.update(gate_spec(rnn_input, Hd, Ao, dt))
        return spec

    # -- graphs ------------------------------------------------------------------------------------
    def build_encoder_graph(self):
        """src_ids [B, S], src_lengths [B] -> memory [B, S, M], keys (bahdanau, general), the
        initial states (``rnn_common.init_sources``) [B, Hd]."""
        c, w = self.config, self.weights
        g = GraphBuilder("encoder")
        P = RNNPieces(g, c, w)
        out, h_n, c_n, lengths = P.encoder_rnn()
        if c.bidirectional and c.encoder_output == "sum":
            H = c.hidden_size
            out = g.op("add", g.op("slice_last", out, start=0, stop=H), g.op("slice_last", out, start=H, stop=2 * H),
                       name="encoder.sum_directions")
        g.output(out, name=MEMORY)
        p = "decoder.attention"
        if c.attention == "bahdanau":
            bias = g.constant(f"{p}.keys_bias", w[f"{p}.Ua.bias"] + w[f"{p}.Wa.bias"])
            g.output(linear(g, out, w, f"{p}.Ua.weight", bias, config=c, name=f"{p}.Ua"), name=KEYS)
        elif c.attention == "concat":  # W [q; m] = W_q q + W_m m: the memory's part once per source
            g.output(g.op("linear", out, self._concat_part(g, "memory"), None, name=f"{p}.W_memory"), name=KEYS)
        elif c.attention == "general":
            bias = P.w(f"{p}.Wa.bias") if c.attention_bias else None
            g.output(linear(g, out, w, f"{p}.Wa.weight", bias, config=c, name=f"{p}.Wa"), name=KEYS)
        P.output_initial_states(out, h_n, c_n, lengths)
        return g.build()

    def _memory_inputs(self, g):
        memory = g.input(MEMORY, dtype="float", ndim=3)  # keys: bahdanau, concat, general
        keys = g.input(KEYS, dtype="float", ndim=3) if self.config.attention != "dot" else memory
        return memory, keys

    def build_decoder_step_graph(self, with_attention: bool = False):
        """prev_tokens [B], step [], src_lengths [B], memory [B, S, M], keys, the initial states,
        h.{l} (c.{l}) [B, Hd] (feed [B, Ao]) -> logits [B, V], (attention [B, S]), next.h.{l}
        (next.c.{l}, next.feed)."""
        c = self.config
        g = GraphBuilder("decoder_step" + ("+attention" if with_attention else ""))
        P = RNNPieces(g, c, self.weights)
        tokens, _, src_lengths, states = P.step_states()
        memory, keys = self._memory_inputs(g)
        emb = P.embed_target(tokens)
        if c.query == "previous":
            query = self._query(g, states)
            context, weights = self._additive(g, P, query, keys, memory, src_lengths)
            top, new = P.cell_stack(g.op("concat", emb, context, axis=-1, name="decoder.rnn_input"), states)
            P.logits(self._readout(g, top, context, emb))
        else:
            x = emb
            if c.input_feeding:
                feed = g.input("feed", dtype="float", ndim=2)  # zeros before step 0: h~ of "step -1"
                x = g.op("concat", emb, feed, axis=-1, name="decoder.rnn_input")
            top, new = P.cell_stack(x, states)
            query = self._query(g, new)
            if c.additive:
                context, weights = self._additive(g, P, query, keys, memory, src_lengths)
            else:
                context, weights = self._luong(g, query, memory, keys, src_lengths, with_attention, step=True)
            attended = self._gated(g, x, top, self._attentional(g, P, top, context))
            P.logits(self._readout(g, attended, context, emb))
            if c.input_feeding:
                g.output(attended, name=NEXT + "feed")
        if with_attention:
            g.output(g.op("reshape", weights, shape=(0, -1)), name=ATTENTION)
        P.output_next_states(new)
        return g.build()

    def _query(self, g, states: dict):
        """The attention query from the decoder states h.{l} [B, Hd] (``attention_query_layers``):
        the top layer's, their sum or their concatenation [B, Ld*Hd]."""
        c = self.config
        layers = [states[f"h.{l}"] for l in range(c.dec_layers)]
        if c.attention_query_layers == "top" or len(layers) == 1:
            return layers[-1]
        if c.attention_query_layers == "concat":
            return g.op("concat", *layers, axis=-1, name="decoder.query_layers")
        query = layers[0]
        for l, h in enumerate(layers[1:], 1):
            query = g.op("add", query, h, name=f"decoder.query_sum{l}")
        return query

    def _concat_part(self, g, part: str):
        """Luong's "concat" W [A, Qd + M] split in its query part W_q [A, Qd] and memory part W_m [A, M]."""
        p, Qd = "decoder.attention", self.config.query_dim
        W = self.weights[f"{p}.W.weight"]
        cols = W[:, :Qd] if part == "query" else W[:, Qd:]
        return g.constant(f"{p}.W_{part}", np.ascontiguousarray(cols))

    def _additive(self, g, P, query, keys, memory, src_lengths):
        """Additive attention of query [B, Qd] -> (context [B, M], weights [B, S]): Bahdanau's (Wa q +
        keys, keys = Ua m + biases) or Luong's concat (W_q q + keys, keys = W_m m)."""
        p = "decoder.attention"
        if self.config.attention == "concat":
            v = g.op("reshape", P.w(f"{p}.v.weight"), shape=(-1,), name=f"{p}.v")
            wq = self._concat_part(g, "query")
        else:
            v = g.op("reshape", P.w(f"{p}.Va.weight"), shape=(-1,), name=f"{p}.v")
            wq = P.w(f"{p}.Wa.weight")
        return g.op("additive_attention", query, keys, memory, wq, v, src_lengths, outputs=2, name=p)

    def _readout(self, g, h, context, emb):
        """What the output layer reads: h, or with ``deep_output`` [h; context; embedding] (Bahdanau et
        al. 2015's deep output t = U_o s + C_o c + V_o E y, one linear over the concatenation)."""
        if not self.config.deep_output:
            return h
        return g.op("concat", h, context, emb, axis=-1, name="decoder.readout_input")

    def _attentional(self, g, P, h, context):
        """h~ = act(W_c [context; h] + b) (or [h; context]) for h [..., Hd], context [..., M] -> [..., Ao]."""
        c = self.config
        parts = (context, h) if c.concat_order == "context_first" else (h, context)
        cat = g.op("concat", *parts, axis=-1, name="decoder.concat_input")
        bias = P.w("decoder.concat.bias") if c.concat_bias else None
        return linear(g, cat, self.weights, "decoder.concat.weight", bias, config=c, activation=c.attentional_activation,
                      name="decoder.concat")

    def _gated(self, g, x, top, attended):
        """h~ through the ``context_gate`` (:mod:`seqjit.models.rnn_context_gate`), or h~ itself."""
        if self.config.context_gate is None:
            return attended
        return apply_gate(g, self.weights, self.config.context_gate, x, top, attended)

    def _luong(self, g, h, memory, keys, src_lengths, with_weights: bool, *, step: bool):
        """Luong (dot/general) attention of h ([B, Hd] or [B, T, Hd]) over the memory -> (context
        [B, M] or [B, T, M], weights [B, 1, T, S] or None)."""
        c = self.config
        Qd, M = c.query_dim, c.memory_dim
        q = g.op("reshape", h, shape=(0, 1, -1, Qd), name="decoder.query")
        k = g.op("reshape", keys, shape=(0, 1, -1, Qd), name="decoder.attention_keys")
        v = g.op("reshape", memory, shape=(0, 1, -1, M), name="decoder.attention_values")
        if with_weights:
            ctx, weights = g.op("attention", q, k, v, src_lengths, scale=1.0, return_weights=True, outputs=2,
                                name="decoder.attention")
        else:
            ctx, weights = g.op("attention", q, k, v, src_lengths, scale=1.0, name="decoder.attention"), None
        return g.op("reshape", ctx, shape=(0, M) if step else (0, -1, M), name="decoder.context"), weights

    def build_decoder_full_graph(self):
        """tgt_ids [B, T], src_lengths [B], memory, keys, the initial states -> logits [B, T, V]
        (:meth:`has_full_decoder` models only: teacher forcing in one pass)."""
        c = self.config
        if not self.has_full_decoder():
            raise ValueError("this model's decoder step reads its previous step (additive attention, input feeding "
                             "or a zero initial state): it has no full-sequence decoder graph")
        g = GraphBuilder("decoder_full")
        P = RNNPieces(g, c, self.weights)
        tokens = g.input("tgt_ids", dtype="int", ndim=2)
        src_lengths = g.input(SRC_LENGTHS, dtype="int", ndim=1)
        memory, keys = self._memory_inputs(g)
        init = P.initial_state_inputs()
        emb = P.embed_target(tokens)
        out = P.decoder_sequence(emb, init)
        context, _ = self._luong(g, out, memory, keys, src_lengths, False, step=False)
        attended = self._gated(g, emb, out, self._attentional(g, P, out, context))
        P.logits(self._readout(g, attended, context, emb))
        return g.build()

    def decoder_state_specs(self, batch: int, max_length: int) -> dict:
        c = self.config
        specs = state_specs(c, batch)
        if c.query == "current" and c.input_feeding:
            specs["feed"] = TensorSpec((batch, c.attentional), np.dtype(c.dtype))
        return specs

    def has_full_decoder(self) -> bool:
        """Luong (dot/general) scoring of the current top state without input feeding and with no
        zero initial state runs teacher forcing in one pass; the rest steps."""
        c = self.config
        return (not c.additive and c.query == "current" and not c.input_feeding and not c.initial_state_zero
                and (c.attention_query_layers == "top" or c.dec_layers == 1))


__all__ = ["AttentionSeq2SeqConfig", "AttentionSeq2SeqModel"]
