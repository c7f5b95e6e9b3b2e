"""Constant folding, dead-code elimination and constant weight layout."""
from __future__ import annotations

import numpy as np

from seqjit.graph.ir import Graph, Node
from seqjit.graph.ops import BindContext, TensorSpec, get_op
from seqjit.graph.derived import derived


def evaluate_node(node: Node, arrays: list, backend=None) -> list:
    """Run one node eagerly on ``arrays`` (None for absent operands); returns its output arrays."""
    opdef = get_op(node.op)
    attrs = opdef.full_attrs(node.attrs, f"node {node.name!r}")
    specs = [None if a is None else TensorSpec(tuple(a.shape), a.dtype) for a in arrays]
    out_specs = opdef.infer(specs, attrs)
    fn = opdef.make(BindContext(attrs, specs, out_specs, [None] * len(out_specs), backend, node.name))
    result = fn(*arrays)
    return list(result) if len(out_specs) > 1 else [result]


def fold_constants(graph: Graph) -> Graph:
    """Replace pure nodes whose operands are all constants by the constants they compute."""
    g = graph.copy()
    kept = []
    for node in g.nodes:
        foldable = get_op(node.op).pure and all(i is None or i in g.constants for i in node.inputs)
        if not foldable:
            kept.append(node)
            continue
        results = evaluate_node(node, [None if i is None else g.constants[i] for i in node.inputs])
        for name, value in zip(node.outputs, results):
            value = np.array(value, order="C", copy=True) if not value.flags.owndata else value
            value.flags.writeable = False
            g.constants[name] = value
    g.nodes = kept
    return eliminate_dead_code(g)


def eliminate_dead_code(graph: Graph) -> Graph:
    """Drop pure nodes none of whose outputs is read or returned, then unused constants."""
    g = graph.copy()
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if not get_op(node.op).pure or any(o in needed for o in node.outputs):
            kept.append(node)
            needed.update(i for i in node.inputs if i is not None)
    g.nodes = kept[::-1]
    g.constants = {k: v for k, v in g.constants.items() if k in needed}
    return g


def prefer_weight_layout(layout: str):
    """A pass storing every constant ``linear`` weight in ``layout`` ("in_out" [K, N] or "out_in" [N, K])."""
    if layout not in ("in_out", "out_in"):
        raise ValueError(f"layout must be 'in_out' or 'out_in', got {layout!r}")

    def relayout(graph: Graph) -> Graph:
        g = graph.copy()
        for node in g.nodes:
            if node.op != "linear" or node.inputs[1] not in g.constants:
                continue
            current = node.attrs.get("weight_layout", "out_in")
            if current == layout:
                continue
            w = node.inputs[1]
            name = f"{w}:{layout}"
            if name not in g.constants:
                src = g.constants[w]
                g.constants[name] = derived([src], "transpose", lambda src=src: np.ascontiguousarray(src.T))
            node.inputs = (node.inputs[0], name, *node.inputs[2:])
            node.attrs["weight_layout"] = layout
        return eliminate_dead_code(g)

    relayout.__name__ = f"prefer_weight_layout_{layout}"
    return relayout
