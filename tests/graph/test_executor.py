"""Executor: shape inference, buffer reuse, plan replay, in-place ops, feed validation, passes."""
import numpy as np
import pytest

from seqjit.errors import GraphError, ShapeError
from seqjit.graph import Executor, GraphBuilder
from seqjit.graph.passes import DEFAULT_PASSES, fold_constants, prefer_weight_layout

rng = np.random.default_rng(0)


def _chain_graph():
    """x [N, D] -> six elementwise steps; every intermediate dies right after its reader."""
    g = GraphBuilder("chain")
    x = g.input("x", dtype="float", ndim=2)
    b = g.constant("b", rng.standard_normal(16).astype(np.float32))
    h = x
    for _ in range(3):
        h = g.op("relu", g.op("add", h, b))
    g.output(g.op("tanh", h), name="y")
    return g.build()


def _chain_numpy(x, b):
    h = x
    for _ in range(3):
        h = np.maximum(h + b, 0)
    return np.tanh(h)


def test_buffer_reuse_actually_reuses():
    graph = _chain_graph()
    ex = Executor(graph, passes=())
    x = rng.standard_normal((32, 16)).astype(np.float32)
    y = ex.run({"x": x})["y"]
    np.testing.assert_allclose(y, _chain_numpy(x, graph.constants["b"]), rtol=1e-6, atol=1e-6)
    plan = ex.plan_for({"x": x})
    mem = plan.memory
    assert len(mem.views) == 7  # six intermediates and the tanh output
    assert len(mem.slab_bytes) <= 3 < len(mem.views)
    assert mem.planned_bytes < mem.value_bytes
    # intermediates two steps apart share memory; a node never writes over its own input
    names = [n.outputs[0] for n in plan.nodes]
    views = mem.views
    assert np.shares_memory(views[names[0]], views[names[2]])
    for node in plan.nodes:
        for i in node.inputs:
            if i in views and node.outputs[0] in views:
                assert not np.shares_memory(views[i], views[node.outputs[0]])


def test_replay_equals_fresh_run_and_outputs_are_copied():
    graph = _chain_graph()
    ex = Executor(graph)
    x1 = rng.standard_normal((8, 16)).astype(np.float32)
    x2 = rng.standard_normal((8, 16)).astype(np.float32)
    y1 = ex.run({"x": x1})["y"]
    y2 = ex.run({"x": x2})["y"]
    assert len(ex._plans) == 1  # same signature: one plan, replayed
    np.testing.assert_array_equal(y1, Executor(graph).run({"x": x1})["y"])
    np.testing.assert_array_equal(y2, Executor(graph).run({"x": x2})["y"])
    # a new shape makes a new plan; copy=False returns the plan's own buffer
    y3 = ex.run({"x": x1[:3]}, copy=False)["y"]
    assert len(ex._plans) == 2
    np.testing.assert_array_equal(y3, y1[:3])
    assert any(np.shares_memory(y3, v) for v in ex.plan_for({"x": x1[:3]}).memory.views.values())


def test_feed_validation_names_the_input():
    ex = Executor(_chain_graph())
    with pytest.raises(ValueError, match="needs input 'x'"):
        ex.run({})
    with pytest.raises(TypeError, match="input 'x' must have a float dtype"):
        ex.run({"x": np.zeros((2, 16), np.int64)})
    with pytest.raises(ValueError, match="input 'x' must have 2 dimensions"):
        ex.run({"x": np.zeros(16, np.float32)})
    with pytest.raises(TypeError, match="must be a numpy.ndarray"):
        ex.run({"x": [[0.0] * 16]})
    with pytest.raises(ValueError, match="no input"):
        ex.run({"x": np.zeros((2, 16), np.float32), "z": np.zeros(1)})
    with pytest.raises(ShapeError, match="node .*add.*do not broadcast"):
        ex.run({"x": np.zeros((2, 5), np.float32)})


def test_missing_attribute_and_dtype_mismatch_are_graph_errors():
    g = GraphBuilder("g")
    x = g.input("x")
    g.output(g.op("split_heads", x))
    with pytest.raises(GraphError, match="needs attribute 'heads'"):
        Executor(g.build()).run({"x": np.zeros((1, 2, 4), np.float32)})
    g = GraphBuilder("g")
    x = g.input("x")
    g.output(g.op("add", x, g.constant("c", np.ones(4, np.float64))))
    with pytest.raises(ShapeError, match="share one dtype"):
        Executor(g.build()).run({"x": np.zeros((2, 4), np.float32)})


def _kv_graph():
    g = GraphBuilder("kv")
    cache = g.input("cache", dtype="float", ndim=4)
    x = g.input("x", dtype="float", ndim=2)
    step = g.input("step", dtype="int", ndim=0)
    q = g.op("split_heads", x, heads=2)
    new = g.op("kv_write", cache, x, step)
    lengths = g.op("step_lengths", step, x)
    g.output(g.op("attention", q, new, new, lengths), name="o")
    g.output(new, name="next.cache")
    return g.build()


def test_kv_write_updates_the_fed_cache_in_place():
    ex = Executor(_kv_graph())
    cache = np.zeros((3, 2, 5, 4), np.float32)
    xs = rng.standard_normal((4, 3, 8)).astype(np.float32)
    for t in range(4):
        out = ex.run({"cache": cache, "x": xs[t], "step": np.array(t)}, copy=False)
        assert out["next.cache"] is cache
        np.testing.assert_array_equal(cache[:, :, t], xs[t].reshape(3, 2, 4))
        # the single query sees cache entries 0..t only
        k = cache[:, :, : t + 1]
        q = xs[t].reshape(3, 2, 1, 4)
        s = (q @ np.swapaxes(k, -1, -2)) / 2.0
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        np.testing.assert_allclose(out["o"], p @ k, rtol=1e-5, atol=1e-6)
    assert len(ex._plans) == 1
    with pytest.raises(ValueError, match=r"step must lie in \[0, 5\)"):
        ex.run({"cache": cache, "x": xs[0], "step": np.array(5)})


def test_reading_a_value_after_an_in_place_update_is_refused():
    g = GraphBuilder("bad")
    cache = g.input("cache")
    x = g.input("x")
    step = g.input("step")
    new = g.op("kv_write", cache, x, step)
    g.output(g.op("add", cache, new))
    with pytest.raises(GraphError, match="reads 'cache' after an in-place op updated it"):
        Executor(g.build(), passes=()).run({"cache": np.zeros((1, 1, 2, 2), np.float32),
                                           "x": np.zeros((1, 2), np.float32), "step": np.array(0)})


def test_constant_folding_and_weight_layout_keep_outputs():
    w = rng.standard_normal((6, 5)).astype(np.float32)
    g = GraphBuilder("fold")
    x = g.input("x", dtype="float")
    wt = g.op("transpose", g.constant("w", w), axes=(1, 0))          # [5, 6], folded
    y = g.op("linear", x, wt, None, weight_layout="in_out")
    pos = g.op("sinusoidal_positions", length=4, dim=6)              # folded
    g.output(g.op("add", y, pos), name="y")
    graph = g.build()
    folded = fold_constants(graph)
    assert [n.op for n in folded.nodes] == ["linear", "add", "identity"]
    x_val = rng.standard_normal((2, 4, 5)).astype(np.float32)
    ref = Executor(graph, passes=()).run({"x": x_val})["y"]
    for passes in (DEFAULT_PASSES, DEFAULT_PASSES + (prefer_weight_layout("out_in"),),
                   DEFAULT_PASSES + (prefer_weight_layout("in_out"),)):
        np.testing.assert_allclose(Executor(graph, passes=passes).run({"x": x_val})["y"], ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ref, x_val @ w.T + folded.constants[folded.nodes[1].inputs[1]], rtol=1e-5, atol=1e-5)


def test_backend_per_op_is_recorded():
    g = GraphBuilder("b")
    x = g.input("x", dtype="float")
    g.output(g.op("log_softmax", g.op("softmax", x)), name="y")
    graph = g.build()
    x_val = rng.standard_normal((3, 5)).astype(np.float32)
    ref = Executor(graph, backend="reference")
    mixed = Executor(graph, backend={"softmax": "reference", "*": "numba"})
    assert ref.plan_for({"x": x_val}).backends == ["reference", "reference", "numpy"]
    assert mixed.plan_for({"x": x_val}).backends == ["reference", "numba", "numpy"]
    np.testing.assert_allclose(mixed.run({"x": x_val})["y"], ref.run({"x": x_val})["y"], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        Executor(graph, backend="tpu").run({"x": x_val})
