"""Merge ``linear`` nodes that read the same input into one GEMM followed by column slices (and
``linear_int8`` nodes likewise: their per-row scales are concatenated with the weights; and
``linear_half`` nodes of one ``fmt``: their 16-bit weights concatenated)."""
from __future__ import annotations

import numpy as np

from seqjit.graph.ir import Graph, Node
from seqjit.graph.derived import derived


def _concat(arrays: list, axis: int) -> np.ndarray:
    return derived(arrays, ("concat", axis), lambda: np.concatenate(arrays, axis=axis))


def _bias_index(node: Node) -> int:
    return 3 if node.op == "linear_int8" else 2


def _bias(graph: Graph, node: Node):
    i = _bias_index(node)
    return graph.constants[node.inputs[i]] if len(node.inputs) > i and node.inputs[i] is not None else None


def _key(graph: Graph, node: Node):
    """Nodes with equal keys can share one GEMM (None: this node cannot be merged)."""
    if node.op not in ("linear", "linear_int8", "linear_half"):
        return None
    w = graph.constants.get(node.inputs[1])
    i = _bias_index(node)
    bias = node.inputs[i] if len(node.inputs) > i else None
    if w is None or (bias is not None and bias not in graph.constants):
        return None
    if node.op == "linear_int8":
        if node.inputs[2] not in graph.constants:
            return None
        return (node.inputs[0], "int8", node.attrs.get("activation"), w.dtype.str, w.shape[1])
    if node.op == "linear_half":
        return (node.inputs[0], "half", node.attrs.get("activation"), node.attrs.get("fmt"), w.shape[1],
                node.attrs.get("arith", "float32"))
    layout = node.attrs.get("weight_layout", "out_in")
    k = w.shape[1] if layout == "out_in" else w.shape[0]
    return (node.inputs[0], layout, node.attrs.get("activation"), w.dtype.str, k)


def merge_projections(graph: Graph) -> Graph:
    """Every group of >= 2 mergeable ``linear`` nodes on one input becomes
    ``merged = linear(x, concat(W), concat(b))`` and one ``slice_last`` view per original output
    (``linear_int8(x, concat(W), concat(scale), concat(b))`` for int8 nodes)."""
    g = graph.copy()
    groups: dict = {}
    for node in g.nodes:
        key = _key(g, node)
        if key is not None:
            groups.setdefault(key, []).append(node)
    replace: dict = {}
    for key, members in groups.items():
        if len(members) < 2:
            continue
        layout = key[1]
        int8, half = layout == "int8", layout == "half"
        weights = [g.constants[m.inputs[1]] for m in members]
        rows = layout in ("out_in", "int8", "half")
        sizes = [w.shape[0] if rows else w.shape[1] for w in weights]
        merged_w = _concat(weights, 0 if rows else 1)
        biases = [_bias(g, m) for m in members]
        bias_dtype = np.float32 if int8 or half else merged_w.dtype
        merged_b = None
        if any(b is not None for b in biases):
            if all(b is not None for b in biases):
                merged_b = _concat(biases, 0)
            else:
                merged_b = np.concatenate([b if b is not None else np.zeros(n, bias_dtype) for b, n in zip(biases, sizes)])
        base = _unique(g, f"{members[0].name}.merged{len(members)}")
        g.constants[base + ".weight"] = merged_w
        inputs = (key[0], base + ".weight")
        if int8:
            g.constants[base + ".scale"] = _concat([g.constants[m.inputs[2]] for m in members], 0)
            inputs += (base + ".scale",)
        if merged_b is not None:
            g.constants[base + ".bias"] = merged_b
            inputs += (base + ".bias",)
        if int8:
            new_nodes = [Node("linear_int8", inputs, (base,), {"activation": key[2]}, base)]
        elif half:
            new_nodes = [Node("linear_half", inputs, (base,), {"fmt": key[3], "activation": key[2],
                                                                    "arith": key[5]}, base)]
        else:
            new_nodes = [Node("linear", inputs, (base,), {"weight_layout": layout, "activation": key[2]}, base)]
        start = 0
        for m, n in zip(members, sizes):
            new_nodes.append(Node("slice_last", (base,), m.outputs, {"start": start, "stop": start + n}, m.name))
            start += n
        replace[id(members[0])] = new_nodes
        for m in members[1:]:
            replace[id(m)] = []
    nodes = []
    for node in g.nodes:
        nodes.extend(replace.get(id(node), [node]))
    g.nodes = nodes
    return g


def _unique(g: Graph, name: str) -> str:
    taken = set(g.constants) | set(g.inputs) | {o for n in g.nodes for o in n.outputs}
    candidate, k = name, 0
    while candidate in taken or candidate + ".weight" in taken:
        k += 1
        candidate = f"{name}_{k}"
    return candidate
