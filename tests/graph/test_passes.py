"""Passes keep outputs equal to the unfused graph and actually rewrite it."""
import numpy as np
import pytest

from seqjit.graph import Executor, GraphBuilder
from seqjit.graph.passes import fuse_linear_activation, fuse_linear_bias, merge_projections, run_passes

rng = np.random.default_rng(1)


def _w(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


@pytest.mark.parametrize("act,attrs", [("relu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("tanh", {})])
def test_linear_bias_activation_fusion(act, attrs):
    g = GraphBuilder("ffn")
    x = g.input("x", dtype="float", ndim=3)
    h = g.op("linear", x, g.constant("w1", _w(12, 8)))               # no bias: fused from the add
    h = g.op("add", h, g.constant("b1", _w(12)))
    h = g.op(act, h, **attrs)
    y = g.op("linear", h, g.constant("w2", _w(8, 12)), g.constant("b2", _w(8)))
    g.output(g.op("relu", y), name="y")
    graph = g.build()
    fused = run_passes(graph, (fuse_linear_bias, fuse_linear_activation))
    assert [n.op for n in fused.nodes] == ["linear", "linear", "identity"]
    assert fused.nodes[0].inputs[2] == "b1"
    assert fused.nodes[0].attrs["activation"] == {"relu": "relu", "silu": "silu", "tanh": "tanh"}.get(
        act, "gelu_tanh" if attrs else "gelu")
    x_val = rng.standard_normal((2, 3, 8)).astype(np.float32)
    ref = Executor(graph, passes=()).run({"x": x_val})["y"]
    np.testing.assert_allclose(Executor(graph).run({"x": x_val})["y"], ref, rtol=1e-5, atol=1e-6)


def test_fusion_leaves_shared_intermediates_alone():
    g = GraphBuilder("shared")
    x = g.input("x", dtype="float")
    h = g.op("linear", x, g.constant("w", _w(4, 4)))
    g.output(g.op("relu", h), name="a")
    g.output(h, name="b")  # the pre-activation value is needed too
    graph = g.build()
    assert [n.op for n in fuse_linear_activation(graph).nodes].count("relu") == 1


def test_qkv_and_cross_kv_merge_into_one_gemm():
    g = GraphBuilder("attn")
    x = g.input("x", dtype="float", ndim=3)
    m = g.input("m", dtype="float", ndim=3)
    q, k, v = (g.op("linear", x, g.constant(f"w{n}", _w(8, 8)), g.constant(f"b{n}", _w(8))) for n in "qkv")
    q, k, v = (g.op("split_heads", t, heads=2) for t in (q, k, v))
    o = g.op("merge_heads", g.op("attention", q, k, v))
    g.output(g.op("linear", o, g.constant("wo", _w(8, 8)), g.constant("bo", _w(8))), name="y")
    for layer in range(3):  # cross K/V of three layers, one without bias, all read m
        for n in "kv":
            bias = None if (layer, n) == (1, "v") else g.constant(f"c{layer}{n}b", _w(8))
            g.output(g.op("linear", m, g.constant(f"c{layer}{n}", _w(8, 8)), bias), name=f"cross_{n}.{layer}")
    graph = g.build()
    merged = merge_projections(graph)
    linears = [n for n in merged.nodes if n.op == "linear"]
    assert len(linears) == 3  # q/k/v merged, out_proj, six cross projections merged
    widths = sorted(merged.constants[n.inputs[1]].shape[0] for n in linears)
    assert widths == [8, 24, 48]
    feeds = {"x": rng.standard_normal((2, 5, 8)).astype(np.float32), "m": rng.standard_normal((2, 7, 8)).astype(np.float32)}
    ref = Executor(graph, passes=()).run(feeds)
    got = Executor(graph).run(feeds)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_merged_and_transposed_weights_are_shared_between_graphs():
    from seqjit.graph.passes import prefer_weight_layout

    ws = [_w(8, 8) for _ in range(3)]

    def build(name):
        g = GraphBuilder(name)
        x = g.input("x", dtype="float")
        for k, w in enumerate(ws):
            g.output(g.op("linear", x, g.constant(f"w{k}", w)), name=f"y{k}")
        return g.build()

    one, two = (run_passes(build(n), (merge_projections, prefer_weight_layout("in_out"))) for n in ("a", "b"))
    (w1,), (w2,) = ([v for v in g.constants.values() if v.shape == (8, 24)] for g in (one, two))
    assert w1 is w2 and not w1.flags.writeable
