"""Vanilla RNN Seq2Seq (Sutskever et al. / Cho et al.): the decoder sees the source only through
the encoder's final state (the bottleneck).

Encoder, bridge, weights and sizes: :mod:`seqjit.models.rnn_common`. Decoder, per step::

    x  = embedding(prev_token)                      [B, Et]
    x  = relu(x)                                    (decoder_input_activation="relu")
    h_l = cell_l(x_l, h_l)  for l in 0..L-1         GRU/LSTM cells, x_0 = x, x_{l+1} = h_l
    logits = out(h_{L-1})                           [B, V]   (log_softmax'd when output_log_softmax)

Configurations:

- plain ``nn.GRU``/``nn.LSTM`` encoder-decoder: the defaults (``cell``, ``num_layers``,
  ``bidirectional`` + ``bridge`` as needed; a one-value bridge with ``decoder_layers`` /
  ``decoder_hidden_size`` for a decoder unlike the encoder; ``output_layer`` "mlp" or "maxout");
- the PyTorch tutorial ("NLP From Scratch: Translation with a Sequence to Sequence Network and
  Attention") ``EncoderRNN`` + ``DecoderRNN``: ``cell="gru"``, ``decoder_input_activation="relu"``,
  ``output_log_softmax=True`` (its dropout is the identity at inference).

Weight names: ``rnn_common``'s, with ``decoder.rnn.weight_ih_l0`` [G*Hd, Et] and
``decoder.out.weight`` [V, Hd]. :meth:`RNNSeq2SeqModel.logits` runs teacher forcing as one
full-sequence decoder RNN (graph ``decoder_full``); the decoder-step graph runs the cells.
"""
from __future__ import annotations

from dataclasses import dataclass

from seqjit.graph import GraphBuilder
from seqjit.models.base import MEMORY, Seq2SeqModel
from seqjit.models.quantization import quantized_spec
from seqjit.models.rnn_common import RNNConfig, decoder_spec, encoder_spec, state_specs
from seqjit.models.rnn_graphs import RNNPieces


@dataclass
class RNNSeq2SeqConfig(RNNConfig):
    arch = "rnn_seq2seq"


class RNNSeq2SeqModel(Seq2SeqModel):
    """See the module docstring. Build with ``RNNSeq2SeqModel(config, weights)``,
    :func:`seqjit.convert.torch_rnn.from_torch` or :func:`seqjit.load`."""

    arch = "rnn_seq2seq"
    config_class = RNNSeq2SeqConfig

    @classmethod
    def weight_spec(cls, config: RNNSeq2SeqConfig) -> dict:
        spec = {**encoder_spec(config), **decoder_spec(config, config.tgt_embed, config.decoder_hidden)}
        return quantized_spec(spec, config)

    def build_encoder_graph(self):
        """src_ids [B, S], src_lengths [B] -> memory [B, S, D*H] (not read by the decoder),
        the initial states (``rnn_common.init_sources``) [B, Hd]."""
        g = GraphBuilder("encoder")
        P = RNNPieces(g, self.config, self.weights)
        out, h_n, c_n, lengths = P.encoder_rnn()
        g.output(out, name=MEMORY)
        P.output_initial_states(out, h_n, c_n, lengths)
        return g.build()

    def build_decoder_step_graph(self, with_attention: bool = False):
        """prev_tokens [B], step [], src_lengths [B], the initial states, h.{l} (c.{l}) [B, Hd]
        -> logits [B, V], next.h.{l} (next.c.{l})."""
        if with_attention:
            raise ValueError("rnn_seq2seq has no attention over the source (the decoder only sees the encoder's "
                             "final state); use attention_seq2seq for attention weights")
        g = GraphBuilder("decoder_step")
        P = RNNPieces(g, self.config, self.weights)
        tokens, _, _, states = P.step_states()
        top, new = P.cell_stack(P.embed_target(tokens), states)
        P.logits(top)
        P.output_next_states(new)
        return g.build()

    def build_decoder_full_graph(self):
        """tgt_ids [B, T], the initial states [B, Hd] -> logits [B, T, V] (teacher forcing)."""
        g = GraphBuilder("decoder_full")
        P = RNNPieces(g, self.config, self.weights)
        tokens = g.input("tgt_ids", dtype="int", ndim=2)
        init = P.initial_state_inputs()
        P.logits(P.decoder_sequence(P.embed_target(tokens), init))
        return g.build()

    def has_full_decoder(self) -> bool:
        """Teacher forcing runs in one pass unless a decoder state starts at zero (then it steps)."""
        return not self.config.initial_state_zero

    def decoder_state_specs(self, batch: int, max_length: int) -> dict:
        return state_specs(self.config, batch)


__all__ = ["RNNSeq2SeqConfig", "RNNSeq2SeqModel"]
