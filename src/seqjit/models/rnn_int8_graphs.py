"""Graph pieces of an int8 RNN (weights: :mod:`seqjit.models.quantization`): every GRU/LSTM layer
and direction, and every decoder cell, as two nodes::

    xg = linear_int8(x, weight_ih, weight_ih.scale, bias_ih)          # every step at once [B, T, G*H]
    out, h_n(, c_n) = {gru,lstm}_recurrence_int8(xg, h0(, c0), lengths, weight_hh, weight_hh.scale,
                                                  bias_hh, reverse=...)

(``seqjit.graph.ops.rnn_int8_ops``). A decoder cell is the same over one step. Per-row quantization
makes the two forms the same arithmetic: a row of x is quantized alone whether it is projected with
its whole sequence or at its own step, so teacher forcing and step-by-step decoding agree.

For the same reason, when x is a token embedding (``[relu](embedding(ids, E))``, a constant table,
no positions) of a small vocabulary (at most :data:`MAX_ROWS_PER_FEATURE` rows per feature), the
input projection of every token is taken once: ``xg = embedding(ids, linear_int8([relu](E), ...))``,
the inner node folded to a constant [V, G*H] by the graph passes. The projected rows are exactly the
rows ``linear_int8`` would compute at run time (each row quantized alone); a step then gathers B rows
instead of quantizing x and reading ``weight_ih`` (an encoder's first layer, an RNN decoder's first
cell; Bahdanau's decoder input concatenates the context, and is projected at run time).

:class:`seqjit.models.rnn_graphs.RNNPieces` calls these when its weights hold int8 RNN matrices.
"""
from __future__ import annotations

import numpy as np

from seqjit.models.quantization import SCALE, linear

#: fold a token-embedding input into projected rows when the table has at most this many rows per
#: embedding feature (the [V, G*H] float32 table is then at most 8x the int8 weight_ih it replaces;
#: a step reads B of its rows)
MAX_ROWS_PER_FEATURE = 2


def is_int8(weights: dict, prefix: str) -> bool:
    """Whether the RNN ``prefix`` (``encoder.rnn``, ``decoder.rnn``) has int8 matrices."""
    return weights[f"{prefix}.weight_hh_l0"].dtype == np.int8


def layer(g, weights: dict, cell: str, prefix: str, sfx: str, x, *, h0=None, c0=None, lengths=None,
          reverse: bool = False, step: bool = False, name: str):
    """One layer and direction (weights ``{prefix}.weight_ih{sfx}``...): x [B, T, I] -> (out [B, T, H],
    h_n [B, H], c_n or None); ``step``: x is one step [B, I]. Nodes ``name.input`` and ``name``."""
    const = lambda key: g.constant(f"{prefix}.{key}{sfx}", weights[f"{prefix}.{key}{sfx}"])  # noqa: E731
    w = f"{prefix}.weight_hh{sfx}"
    embedded = _token_embedding(g, x)
    if embedded is not None:
        ids, table = embedded
        rows = linear(g, table, weights, f"{prefix}.weight_ih{sfx}", const("bias_ih"), name=f"{name}.input_table")
        xg = g.op("embedding", ids, rows, name=f"{name}.input")
    else:
        xg = linear(g, x, weights, f"{prefix}.weight_ih{sfx}", const("bias_ih"), name=f"{name}.input")
    if step:
        xg = g.op("reshape", xg, shape=(0, 1, -1), name=f"{name}.input_steps")
    hidden = (const("weight_hh"), g.constant(w + SCALE, weights[w + SCALE]), const("bias_hh"))
    if cell == "gru":
        out, h_n = g.op("gru_recurrence_int8", xg, h0, lengths, *hidden, reverse=reverse, outputs=2, name=name)
        return out, h_n, None
    return g.op("lstm_recurrence_int8", xg, h0, c0, lengths, *hidden, reverse=reverse, outputs=3, name=name)


def sequence(g, weights: dict, cell: str, layers: int, x, prefix: str, directions: int, *, h0s=None, c0s=None,
             lengths=None, name: str):
    """The batch-first multi-layer RNN ``prefix`` over x [B, T, I] -> (output [B, T, D*H],
    h_n [L*D, B, H], c_n or None), like ``RNNPieces.rnn``; ``h0s``/``c0s``: the initial state [B, H]
    of each layer and direction (index l*D + d), or None for zeros."""
    hidden = weights[f"{prefix}.weight_hh_l0"].shape[1]
    finals = {"h": [], "c": []}
    for k in range(layers):
        outs = []
        for d in range(directions):
            i, sfx = k * directions + d, f"_l{k}" + ("_reverse" if d else "")
            out, h_n, c_n = layer(g, weights, cell, prefix, sfx, x, h0=None if h0s is None else h0s[i],
                                  c0=None if c0s is None else c0s[i], lengths=lengths, reverse=d == 1, name=name + sfx)
            outs.append(out)
            for kind, value in (("h", h_n), ("c", c_n)):
                if value is not None:
                    finals[kind].append(g.op("reshape", value, shape=(1, -1, hidden)))
        x = outs[0] if directions == 1 else g.op("concat", *outs, axis=-1, name=f"{name}.l{k}")
    h_n, c_n = (None if not v else v[0] if len(v) == 1 else g.op("concat", *v, axis=0) for v in finals.values())
    return x, h_n, c_n


def cell_stack(g, weights: dict, config, x, states: dict):
    """One step of the L decoder cells (like ``RNNPieces.cell_stack``): x [B, I] -> (top hidden
    [B, Hd], new states by name ``h.{l}`` / ``c.{l}``)."""
    new = {}
    for l in range(config.dec_layers):
        _, x, c_new = layer(g, weights, config.cell, "decoder.rnn", f"_l{l}", x, h0=states[f"h.{l}"],
                            c0=states.get(f"c.{l}"), step=True, name=f"decoder.cell{l}")
        new[f"h.{l}"] = x
        if c_new is not None:
            new[f"c.{l}"] = c_new
    return x, new


def decoder_sequence(g, weights: dict, config, x, init: dict):
    """Teacher forcing (like ``RNNPieces.decoder_sequence``): the decoder RNN over x [B, T, I] from
    the initial states (state name ``h.{l}`` / ``c.{l}`` -> value) -> [B, T, Hd]."""
    layers = range(config.dec_layers)
    c0s = [init[f"c.{l}"] for l in layers] if config.cell == "lstm" else None
    out, _, _ = sequence(g, weights, config.cell, config.dec_layers, x, "decoder.rnn", 1,
                         h0s=[init[f"h.{l}"] for l in layers], c0s=c0s, name="decoder.rnn")
    return out


def _token_embedding(g, x):
    """``(ids, table)`` when x is ``[relu](embedding(ids, E))`` of a constant E (no positions, scale 1)
    with at most MAX_ROWS_PER_FEATURE rows per feature; ``table`` is E, or ``relu(E)`` (a node on
    constants, folded by the passes). Else None."""
    producers = {o: n for n in g._nodes for o in n.outputs}  # (the builder's nodes so far)
    node, relu = producers.get(x), False
    if node is not None and node.op == "relu":
        node, relu = producers.get(node.inputs[0]), True
    if (node is None or node.op != "embedding" or node.inputs[1] not in g._constants or node.inputs[0] in g._constants
            or (len(node.inputs) > 2 and node.inputs[2] is not None) or node.attrs.get("scale", 1.0) != 1.0):
        return None
    table = node.inputs[1]
    vocab, features = g._constants[table].shape
    if vocab > MAX_ROWS_PER_FEATURE * features:
        return None
    return node.inputs[0], (g.op("relu", table) if relu else table)
