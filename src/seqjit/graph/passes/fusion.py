"""Fuse ``linear`` with a following bias ``add`` and/or activation into one ``linear`` node (and an
activation into ``linear_int8`` and ``linear_half``)."""
from __future__ import annotations

from seqjit.graph.ir import Graph

#: activation op (and its attrs) -> the linear kernel's ``activation`` argument
_ACTIVATION = {"relu": "relu", "silu": "silu", "tanh": "tanh"}


def _activation_name(node):
    if node.op == "gelu":
        return "gelu_tanh" if node.attrs.get("approximate", "none") == "tanh" else "gelu"
    return _ACTIVATION.get(node.op)


def _sole_reader(graph: Graph, value: str, consumers: dict):
    """The one node reading ``value`` when nothing else (node or graph output) reads it, else None."""
    readers = consumers.get(value, [])
    if len(readers) != 1 or value in graph.outputs:
        return None
    return readers[0]


def fuse_linear_activation(graph: Graph) -> Graph:
    """``y = linear(x, w, b); z = act(y)`` -> ``z = linear(x, w, b, activation=act)`` (the same for
    ``linear_int8`` and ``linear_half``)."""
    g = graph.copy()
    producers, consumers = g.producers(), g.consumers()
    removed = set()
    for node in g.nodes:
        act = _activation_name(node)
        if act is None:
            continue
        src = producers.get(node.inputs[0])
        if src is None or src.op not in ("linear", "linear_int8", "linear_half") or src.attrs.get("activation") is not None:
            continue
        if _sole_reader(g, src.outputs[0], consumers) is not node:
            continue
        src.attrs["activation"] = act
        src.outputs = node.outputs
        removed.add(id(node))
    g.nodes = [n for n in g.nodes if id(n) not in removed]
    return g


def fuse_linear_bias(graph: Graph) -> Graph:
    """``y = linear(x, w); z = add(y, b)`` with constant ``b`` of shape [N] -> ``z = linear(x, w, b)``."""
    g = graph.copy()
    producers, consumers = g.producers(), g.consumers()
    removed = set()
    for node in g.nodes:
        if node.op != "add":
            continue
        for k in (0, 1):
            src, bias = producers.get(node.inputs[k]), node.inputs[1 - k]
            if src is None or src.op != "linear" or (len(src.inputs) > 2 and src.inputs[2] is not None):
                continue
            if src.attrs.get("activation") is not None or bias not in g.constants:
                continue
            w = g.constants.get(src.inputs[1])
            b = g.constants[bias]
            if w is None or b.ndim != 1 or b.dtype != w.dtype:
                continue
            n = w.shape[0] if src.attrs.get("weight_layout", "out_in") == "out_in" else w.shape[1]
            if b.shape[0] != n or _sole_reader(g, src.outputs[0], consumers) is not node:
                continue
            src.inputs = (src.inputs[0], src.inputs[1], bias)
            src.outputs = node.outputs
            removed.add(id(node))
            break
    g.nodes = [n for n in g.nodes if id(n) not in removed]
    return g
