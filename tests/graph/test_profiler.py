"""Profiler: per-node and per-op times, printable tables."""
import numpy as np

import seqjit
from seqjit.graph import Executor, GraphBuilder


def _graph():
    g = GraphBuilder("prof")
    x = g.input("x", dtype="float", ndim=2)
    h = g.op("softmax", g.op("tanh", x))
    h = g.op("add", h, g.op("relu", x))
    g.output(g.op("log_softmax", h), name="y")
    return g.build()


def test_profile_lists_every_op_and_node():
    graph = _graph()
    ex = Executor(graph, passes=())
    x = np.random.default_rng(0).standard_normal((4, 10)).astype(np.float32)
    plain = ex.run({"x": x})["y"]
    profiled = ex.run({"x": x}, profile=True)["y"]
    np.testing.assert_array_equal(plain, profiled)
    prof = ex.last_profile
    table = prof.table()
    for op in ("tanh", "softmax", "relu", "add", "log_softmax", "identity"):
        assert op in table
    by_node = prof.by_node()
    assert len(by_node) == len(graph.nodes)
    assert all(t >= 0 for *_, t in by_node)
    assert "total" in prof.table(by="node")


def test_profile_context_manager_accumulates_runs():
    ex = Executor(_graph())
    x = np.ones((2, 3), np.float32)
    with seqjit.profile() as prof:
        for _ in range(3):
            ex.run({"x": x})
    ex.run({"x": x})  # outside the block: not recorded
    assert prof.runs == {"prof": 3}
    calls = {op: c for op, _, c, _ in prof.by_op()}
    assert calls["softmax"] == 3 and calls["log_softmax"] == 3
    assert "prof x3" in str(prof)
