"""Projected-embedding tables for the native replay's recurrent cells.

A decoder cell's input projection ``x @ W_ih^T + b_ih`` reads all of ``W_ih`` at every step, and at
batch 1 that read is the step's cost (G2P-sized GRU: 768 KB of ``W_ih`` beside 768 KB of ``W_hh``,
together more than the 1 MB L2 of the machines we measure on). When ``x`` is a token embedding
(``embedding(ids, E)``, optionally through ``relu``, optionally the first or last part of a
``concat`` such as Bahdanau's ``[embedding; context]``) and the vocabulary is small, the product
can be taken once per vocabulary entry at lowering::

    table = f(E * scale) @ W_e^T + b_ih      # [V, G*H], W_e: the columns of W_ih reading the embedding

and a step gathers ``table[ids]`` (the embedding's own bounds check included) and multiplies only
the rest of ``x`` (the attention context) by the remaining columns. The table is computed in
float64 and rounded once, so it is at least as exact as the float32 product it replaces.

The same holds for the first layer of an encoder ``gru``/``lstm`` over embedded source tokens: its
input projection of every step becomes a gather from one table per direction.

Only the native replay folds; the Python replay keeps the graph as written (the reference).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from seqjit.graph.derived import derived

#: fold only when the table has at most this many rows per input feature it replaces (the table
#: is then no larger than twice the weight columns, and a step reads B rows of it instead of them)
MAX_ROWS_PER_FEATURE = 2

_CELLS = {"gru_cell": 2, "lstm_cell": 3}  # op -> index of w_ih among the inputs


@dataclass
class Fold:
    """How a cell's (or a sequence's first layer's) input projection runs: gather rows of
    ``tables[d]`` (direction d) by ``ids``; then, when ``rest`` (a value name) is set, add
    ``rest @ w_rest^T``."""
    ids: str
    tables: list  # [V, G*H] float32, one per direction
    rest: str | None = None
    w_rest: np.ndarray | None = None  # [G*H, I - E] float32 ("out_in")
    dead: list = field(default_factory=list)  # names of nodes only this fold read


def find_folds(plan) -> dict:
    """{cell node name: Fold} for the plan's foldable gru_cell / lstm_cell nodes."""
    g = plan.graph
    producers = {o: n for n in plan.nodes for o in n.outputs}
    readers: dict = {}
    for n in plan.nodes:
        for i in n.inputs:
            if i is not None:
                readers[i] = readers.get(i, 0) + 1
    for o in g.outputs:
        readers[o] = readers.get(o, 0) + 1
    folds = {}
    for node in plan.nodes:
        if node.op in _CELLS:
            fold = _fold(node, _CELLS[node.op], g.constants, plan.specs, producers, readers)
        elif node.op in ("gru", "lstm"):
            fold = _fold_sequence(node, g.constants, producers, readers)
        else:
            continue
        if fold is not None:
            folds[node.name] = fold
    return folds


def _fold_sequence(node, constants, producers, readers):
    n_states = 1 if node.op == "gru" else 2
    weights = dict(zip(node.attrs["keys"], node.inputs[2 + n_states:]))
    found = _embedding_of(node.inputs[0], constants, producers)
    if found is None:
        return None
    emb, relu = found
    tables = []
    for sfx in ("_l0", "_l0_reverse")[:2 if "weight_ih_l0_reverse" in weights else 1]:
        w, b = weights.get("weight_ih" + sfx), weights.get("bias_ih" + sfx)
        if w not in constants or (b is not None and b not in constants):
            return None
        fold = _make(emb, relu, emb.inputs[0], constants[emb.inputs[1]], constants[w],
                     None if b is None else constants[b], 0, None, [], readers)
        if fold is None:
            return None
        tables.append(fold.tables[0])
    fold.tables = tables
    return fold


def _fold(cell, k, constants, specs, producers, readers):
    x, w_ih = cell.inputs[0], cell.inputs[k]
    b_ih = cell.inputs[k + 2] if len(cell.inputs) > k + 2 else None
    if w_ih not in constants or (b_ih is not None and b_ih not in constants):
        return None
    chain = []  # the nodes between the embedding and the cell, cell side first
    parts, offsets = [x], [0]
    node = producers.get(x)
    if node is not None and node.op == "concat" and len(node.inputs) == 2 and node.attrs.get("axis", -1) in (-1, 1):
        chain.append(node)
        parts = list(node.inputs)
        offsets = [0, specs[parts[0]].shape[-1]]
    for pos, part in enumerate(parts):
        found = _embedding_of(part, constants, producers)
        if found is None:
            continue
        emb, relu = found
        ids, table = emb.inputs[0], emb.inputs[1]
        rest = parts[1 - pos] if len(parts) == 2 else None
        return _make(emb, relu, ids, constants[table], constants[w_ih],
                     None if b_ih is None else constants[b_ih], offsets[pos], rest, chain, readers)
    return None


def _embedding_of(value, constants, producers):
    """``(embedding node, relu node or None)`` when ``value`` is ``[relu](embedding(ids, E))`` of a
    constant table without positions; else None."""
    node = producers.get(value)
    relu = None
    if node is not None and node.op == "relu":
        relu, node = node, producers.get(node.inputs[0])
    if node is None or node.op != "embedding" or node.inputs[1] not in constants or node.inputs[0] in constants:
        return None
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        return None
    return node, relu


def _make(emb, relu, ids, table, w_ih, b_ih, offset, rest, chain, readers):
    vocab, width = table.shape
    if table.dtype != np.float32 or w_ih.dtype != np.float32 or vocab > MAX_ROWS_PER_FEATURE * width:
        return None
    scale = float(emb.attrs.get("scale", 1.0))
    cols = slice(offset, offset + width)
    sources = [table, w_ih] + ([] if b_ih is None else [b_ih])

    def project():
        e = table.astype(np.float64) * np.float32(scale)
        if relu is not None:
            e = np.maximum(e, 0.0)
        p = e @ w_ih[:, cols].astype(np.float64).T
        if b_ih is not None:
            p += b_ih
        return p.astype(np.float32)

    projected = derived(sources, ("projected_embedding", offset, width, relu is not None, scale), project)
    w_rest = None
    if rest is not None:
        keep = np.r_[0:offset, offset + width:w_ih.shape[1]]
        w_rest = derived([w_ih], ("columns_without", offset, width), lambda: np.ascontiguousarray(w_ih[:, keep]))
    dead = []
    # the concat / relu / embedding feeding only this cell need not run
    for node in chain + ([] if relu is None else [relu]) + [emb]:
        if all(readers.get(o, 0) == 1 for o in node.outputs):
            dead.append(node.name)
        else:
            break
    return Fold(ids, [projected], rest, w_rest, dead)
