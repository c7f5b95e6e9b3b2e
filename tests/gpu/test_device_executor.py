"""Executors bound to the cuda backend: every planned buffer and constant is a device array, constants
go up once per placement, feeds may be host or device arrays, and every layout op the three
architectures' graphs use gives the CPU executor's result (the CPU executor is the reference)."""
import numpy as np
import pytest

from seqjit.errors import GraphError
from seqjit.graph import Executor, GraphBuilder

from .conftest import cuda_or_skip

RNG = np.random.default_rng(3)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _layout_graph():
    """Most layout ops of the step graphs, around kernel ops that need dense inputs."""
    g = GraphBuilder("layout")
    x = g.input("x", dtype="float", ndim=3)  # [B, L, E] = [2, 3, 8]
    cache = g.input("cache", dtype="float", ndim=4)  # [B, H, T, Dh] = [2, 2, 5, 4]
    step = g.input("step", dtype="int", ndim=0)
    tokens = g.input("tokens", dtype="int", ndim=1)
    w = g.constant("w", _f(24, 8))
    merged = g.op("linear", x, w, g.constant("b", _f(24)))
    q, k, v = (g.op("slice_last", merged, start=s, stop=s + 8) for s in (0, 8, 16))
    heads = g.op("split_heads", q, heads=2)  # a copy of a strided slice
    back = g.op("merge_heads", g.op("identity", heads))
    g.output(g.op("add", back, g.op("transpose", k, axes=(0, 1, 2))), name="added")
    g.output(g.op("layer_norm", v, g.constant("ln.w", _f(8)), g.constant("ln.b", _f(8))), name="normed")  # strided in
    last = g.op("slice_last", g.op("reshape", x, shape=(0, -1)), start=16, stop=24)  # [B, 8]
    g.output(g.op("kv_write", cache, last, step), name="cache_out")
    g.output(g.op("step_lengths", step, tokens), name="lengths")
    table = g.constant("table", _f(6, 8))
    g.output(g.op("position_at", table, step), name="row")
    g.output(g.op("concat", last, g.op("add", last, g.constant("bias", _f(8))), axis=-1), name="cat")
    g.output(g.op("stack", last, last, axis=1), name="stacked")
    g.output(g.op("select_first_step", step, last, g.op("relu", last)), name="selected")
    g.output(g.op("embedding", tokens, table, g.op("position_rows", table, g.op("reshape", tokens, shape=(1, -1)))),
             name="embedded")
    return g.build()


def _feeds(step):
    return {"x": _f(2, 3, 8), "cache": _f(2, 2, 5, 4), "step": np.array(step, np.int64), "tokens": np.array([4, 1])}


def test_layout_ops_on_the_device_match_the_cpu():
    cuda_or_skip()
    from seqjit.kernels._cuda import is_device_array

    graph = _layout_graph()
    cpu, gpu = Executor(graph, replay="python"), Executor(graph, backend="cuda")
    for step in (0, 3):
        feeds = _feeds(step)
        want = cpu.run({n: a.copy() for n, a in feeds.items()})
        plan = gpu.lease(feeds)
        assert plan.memory.views and all(is_device_array(v) for v in plan.memory.views.values())
        assert all(is_device_array(plan._env[plan._slot[c]]) for c in graph.constants)
        got = plan.run(dict(feeds), copy=True)  # host feeds in, host copies out
        gpu.release(plan)
        assert set(got) == set(want)
        for name in want:
            assert isinstance(got[name], np.ndarray), name
            np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-6, err_msg=name)


def test_device_feeds_device_outputs_and_constants_uploaded_once():
    cuda_or_skip()
    from seqjit.graph.device_plan import DevicePlacement
    from seqjit.kernels import _cuda

    graph = _layout_graph()
    placement = DevicePlacement()
    first = Executor(graph, backend="cuda", device=placement)
    second = Executor(graph, backend="cuda", device=placement)  # another graph of the same model
    feeds = _feeds(2)
    dfeeds = {n: (a if a.ndim == 0 else _cuda.to_device(a)) for n, a in feeds.items()}
    out = first.run(dfeeds, copy=False)
    assert all(_cuda.is_device_array(v) for v in out.values())
    again = second.run(feeds)
    np.testing.assert_allclose(again["normed"], out["normed"].copy_to_host(), rtol=1e-6)
    assert len(placement._constants) == len(graph.constants) and placement.constant_bytes > 0
    with pytest.raises(TypeError, match="input 'x' must be a numpy.ndarray"):
        Executor(graph, replay="python").run(dfeeds)  # a CPU executor refuses device arrays


def test_an_op_without_a_cuda_form_is_named():
    cuda_or_skip()
    g = GraphBuilder("int8")
    ids = g.input("ids", dtype="int", ndim=1)
    g.output(g.op("embedding_int8", ids, g.constant("t", np.ones((4, 2), np.int8)), g.constant("s", np.ones(4, np.float32))))
    with pytest.raises(GraphError, match="op 'embedding_int8' has no cuda implementation"):
        Executor(g.build(), backend="cuda").run({"ids": np.array([1, 2])})
