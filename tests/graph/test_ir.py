"""Graph IR: building, validation errors, topological order."""
import numpy as np
import pytest

from seqjit.errors import GraphError
from seqjit.graph import Graph, GraphBuilder, Node
from seqjit.graph.ir import InputSpec


def test_builder_makes_a_validated_graph_in_topological_order():
    g = GraphBuilder("g")
    x = g.input("x", dtype="float", ndim=2)
    b = g.constant("b", np.ones(3, np.float32))
    y = g.op("add", x, b)
    z = g.op("relu", y)
    g.output(z, name="out")
    graph = g.build()
    assert list(graph.inputs) == ["x"] and graph.outputs == ["out"]
    assert [n.op for n in graph.nodes] == ["add", "relu", "identity"]
    # nodes listed out of order are sorted
    shuffled = Graph("s", {"x": InputSpec()}, ["z"], [Node("relu", ["y"], ["z"]), Node("relu", ["x"], ["y"])])
    assert [n.outputs[0] for n in shuffled.validate().nodes] == ["y", "z"]


def test_undefined_value_is_named():
    graph = Graph("g", {"x": InputSpec()}, ["y"], [Node("add", ["x", "w"], ["y"])])
    with pytest.raises(GraphError, match="reads undefined value 'w'"):
        graph.validate()


def test_duplicate_definition_is_named():
    graph = Graph("g", {"x": InputSpec()}, ["y"], [Node("relu", ["x"], ["y"]), Node("tanh", ["x"], ["y"])])
    with pytest.raises(GraphError, match="'y' is defined twice"):
        graph.validate()
    g = GraphBuilder("g")
    g.input("x")
    with pytest.raises(GraphError, match="defined twice"):
        g.input("x")


def test_cycle_is_reported():
    nodes = [Node("relu", ["b"], ["a"]), Node("relu", ["a"], ["b"])]
    with pytest.raises(GraphError, match="cycle"):
        Graph("g", {}, ["a"], nodes).validate()


def test_undefined_output_and_unknown_op():
    with pytest.raises(GraphError, match="output 'nope' is never defined"):
        Graph("g", {"x": InputSpec()}, ["nope"], []).validate()
    g = GraphBuilder("g")
    x = g.input("x")
    g.output(g.op("frobnicate", x))
    with pytest.raises(GraphError, match="unknown op 'frobnicate'"):
        g.build()


def test_constant_must_be_an_array():
    g = GraphBuilder("g")
    with pytest.raises(TypeError, match="constant 'w' must be a numpy.ndarray"):
        g.constant("w", [1, 2, 3])


def test_multi_output_op_and_scoped_names():
    g = GraphBuilder("g")
    q = g.input("q")
    with g.scope("layer0"):
        o, w = g.op("attention", q, q, q, return_weights=True, outputs=2)
    g.output(o)
    g.output(w)
    graph = g.build()
    assert graph.nodes[0].outputs == ("layer0.attention.0", "layer0.attention.1")
    assert "attention" in repr(graph)
