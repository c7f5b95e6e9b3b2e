"""The graph IR: values are names, nodes are ops over values, constants are named NumPy arrays.

A :class:`Graph` is a static single-assignment dataflow graph:

- ``inputs``: names fed at run time, each with an :class:`InputSpec` (dtype kind and rank);
- ``constants``: name -> ``np.ndarray`` (weights, tables);
- ``nodes``: :class:`Node` ``(op, inputs, outputs, attrs, name)``; an input may be ``None`` for an
  absent optional operand (e.g. a linear without bias);
- ``outputs``: the names the graph returns.

Every value is defined exactly once (graph input, constant or node output). Build graphs with
:class:`GraphBuilder`::

    g = GraphBuilder("ffn")
    x = g.input("x", dtype="float", ndim=3)
    w = g.constant("fc1.weight", w1)
    h = g.op("linear", x, w, None, activation="relu")
    g.output(h, name="y")
    graph = g.build()          # validated
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from seqjit.errors import GraphError

_KINDS = ("float", "int", "any")


@dataclass(frozen=True)
class InputSpec:
    """What a graph input must be: ``dtype`` kind ("float", "int" or "any") and rank (None: any)."""

    dtype: str = "any"
    ndim: int | None = None


@dataclass
class Node:
    """One op application: ``outputs = op(*inputs, **attrs)``."""

    op: str
    inputs: tuple
    outputs: tuple
    attrs: dict = field(default_factory=dict)
    name: str = ""

    def __post_init__(self):
        self.inputs = tuple(self.inputs)
        self.outputs = tuple(self.outputs)
        if not self.name:
            self.name = self.outputs[0] if self.outputs else self.op

    def __repr__(self) -> str:
        args = ", ".join("None" if i is None else i for i in self.inputs)
        attrs = "".join(f", {k}={v!r}" for k, v in self.attrs.items())
        return f"{', '.join(self.outputs)} = {self.op}({args}{attrs})"


@dataclass
class Graph:
    """A validated dataflow graph; see the module docstring."""

    name: str
    inputs: dict  # name -> InputSpec (ordered)
    outputs: list
    nodes: list
    constants: dict = field(default_factory=dict)

    def producers(self) -> dict:
        """value name -> node that defines it (node outputs only)."""
        return {out: node for node in self.nodes for out in node.outputs}

    def consumers(self) -> dict:
        """value name -> list of nodes reading it."""
        found: dict = {}
        for node in self.nodes:
            for i in node.inputs:
                if i is not None:
                    found.setdefault(i, []).append(node)
        return found

    def validate(self, known_ops=None) -> "Graph":
        """Check the graph and put ``nodes`` in topological order; return self.

        Raises :class:`GraphError` naming the offending value or node for: a value defined twice, a
        value used but never defined, an undefined graph output, a cycle, an unknown op (when
        ``known_ops`` is given), or a constant that is not a NumPy array.
        """
        defined: dict = {}
        for name in self.inputs:
            defined[name] = "graph input"
        for name, value in self.constants.items():
            if not isinstance(value, np.ndarray):
                raise GraphError(f"graph {self.name!r}: constant {name!r} must be a numpy.ndarray, got {type(value).__name__}")
            if name in defined:
                raise GraphError(f"graph {self.name!r}: value {name!r} is defined twice (graph input and constant)")
            defined[name] = "constant"
        for node in self.nodes:
            if known_ops is not None and node.op not in known_ops:
                raise GraphError(f"graph {self.name!r}: node {node.name!r} uses unknown op {node.op!r}")
            for out in node.outputs:
                if out is None:
                    raise GraphError(f"graph {self.name!r}: node {node.name!r} has an output named None")
                if out in defined:
                    raise GraphError(
                        f"graph {self.name!r}: value {out!r} is defined twice ({defined[out]} and node {node.name!r})"
                    )
                defined[out] = f"node {node.name!r}"
        for node in self.nodes:
            for i in node.inputs:
                if i is not None and i not in defined:
                    raise GraphError(f"graph {self.name!r}: node {node.name!r} reads undefined value {i!r}")
        for out in self.outputs:
            if out not in defined:
                raise GraphError(f"graph {self.name!r}: output {out!r} is never defined")
        self.nodes = _topological_order(self)
        return self

    def copy(self) -> "Graph":
        """A shallow copy (same constant arrays, copied node list and attrs) for passes to rewrite."""
        nodes = [Node(n.op, n.inputs, n.outputs, dict(n.attrs), n.name) for n in self.nodes]
        return Graph(self.name, dict(self.inputs), list(self.outputs), nodes, dict(self.constants))

    def __repr__(self) -> str:
        lines = [f"graph {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)})"]
        lines += [f"  const {k}: {list(v.shape)} {v.dtype}" for k, v in self.constants.items()]
        lines += [f"  {n!r}" for n in self.nodes]
        return "\n".join(lines)


def _topological_order(graph: Graph) -> list:
    """Kahn's algorithm, stable (keeps the given order where dependencies allow)."""
    producer = graph.producers()
    pending = {id(n): sum(1 for i in set(n.inputs) if i in producer) for n in graph.nodes}
    users: dict = {}
    for node in graph.nodes:
        for i in set(node.inputs):
            if i in producer:
                users.setdefault(i, []).append(node)
    ready = [n for n in graph.nodes if pending[id(n)] == 0]
    order = []
    position = {id(n): k for k, n in enumerate(graph.nodes)}
    import heapq

    heap = [(position[id(n)], id(n), n) for n in ready]
    heapq.heapify(heap)
    while heap:
        _, _, node = heapq.heappop(heap)
        order.append(node)
        for out in node.outputs:
            for user in users.get(out, ()):
                pending[id(user)] -= 1
                if pending[id(user)] == 0:
                    heapq.heappush(heap, (position[id(user)], id(user), user))
    if len(order) != len(graph.nodes):
        stuck = [n.name for n in graph.nodes if pending[id(n)] > 0]
        raise GraphError(f"graph {graph.name!r} has a cycle through node(s): {', '.join(stuck[:8])}")
    return order


class GraphBuilder:
    """Readable graph construction; every method returns value names (strings)."""

    def __init__(self, name: str):
        self.name = name
        self._inputs: dict = {}
        self._constants: dict = {}
        self._nodes: list = []
        self._outputs: list = []
        self._used: set = set()
        self._counter = itertools.count()
        self._scope: list = []

    # -- naming ---------------------------------------------------------------------------------
    def scope(self, prefix: str):
        """Context manager prefixing auto-generated node names: ``with g.scope("layers.0"): ...``."""
        builder = self

        class _Scope:
            def __enter__(self):
                builder._scope.append(prefix)

            def __exit__(self, *exc):
                builder._scope.pop()

        return _Scope()

    def _fresh(self, hint: str, scoped: bool = True) -> str:
        base = ".".join([*self._scope, hint]) if scoped else hint
        name = base
        while name in self._used:
            name = f"{base}_{next(self._counter)}"
        self._used.add(name)
        return name

    def _claim(self, name: str) -> str:
        if name in self._used:
            raise GraphError(f"graph {self.name!r}: value {name!r} is defined twice")
        self._used.add(name)
        return name

    # -- building ---------------------------------------------------------------------------------
    def input(self, name: str, *, dtype: str = "any", ndim: int | None = None) -> str:
        if dtype not in _KINDS:
            raise ValueError(f"input dtype kind must be one of {_KINDS}, got {dtype!r}")
        self._inputs[self._claim(name)] = InputSpec(dtype, ndim)
        return name

    def constant(self, name: str, array) -> str:
        """Register a named constant; registering the very same array again returns the name."""
        if name in self._constants and self._constants[name] is array:
            return name
        if not isinstance(array, np.ndarray):
            raise TypeError(f"constant {name!r} must be a numpy.ndarray, got {type(array).__name__}")
        self._constants[self._claim(name)] = array
        return name

    def op(self, op: str, *inputs, name: str | None = None, outputs: int | tuple | list = 1, **attrs):
        """Add ``op(*inputs, **attrs)``; returns its output name, or a tuple of names when ``outputs``
        is a count > 1 or a list of names. ``name`` names the node (taken as is); without it the
        node and its outputs get fresh names under the current :meth:`scope`."""
        if isinstance(outputs, int):
            hint = name or op
            out_names = [self._fresh(hint if outputs == 1 else f"{hint}.{k}", scoped=name is None) for k in range(outputs)]
            single = outputs == 1
        else:
            out_names = [self._claim(o) for o in outputs]
            single = False
        node_name = name or out_names[0]
        self._nodes.append(Node(op, tuple(inputs), tuple(out_names), attrs, node_name))
        return out_names[0] if single else tuple(out_names)

    def output(self, value: str, name: str | None = None) -> str:
        """Mark ``value`` as a graph output; ``name`` renames it (adds an ``identity`` node)."""
        if name is not None and name != value:
            value = self.op("identity", value, outputs=[name])[0]
        self._outputs.append(value)
        return value

    def build(self, known_ops=None) -> Graph:
        if known_ops is None:
            from seqjit.graph.ops import OPS

            known_ops = OPS
        graph = Graph(self.name, dict(self._inputs), list(self._outputs), list(self._nodes), dict(self._constants))
        return graph.validate(known_ops)
