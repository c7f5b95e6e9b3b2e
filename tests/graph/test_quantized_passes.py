"""The passes on linear_int8 nodes: Q/K/V merging (weights and scales concatenated) and activation
fusion keep the outputs of the unrewritten graph, bit for bit (per-row quantization makes a merged
int8 GEMM the same arithmetic as the separate ones)."""
import numpy as np
import pytest

from seqjit.graph import Executor, GraphBuilder
from seqjit.graph.passes import fuse_linear_activation, merge_projections, run_passes
from seqjit.kernels.linear_int8.reference import quantize_int8

rng = np.random.default_rng(3)


def _qw(n, k):
    return quantize_int8(rng.standard_normal((n, k)).astype(np.float32))


def test_int8_projections_merge_and_fuse_exactly():
    g = GraphBuilder("int8")
    x = g.input("x", dtype="float", ndim=2)
    outs = []
    for i, n in enumerate((8, 12, 5)):
        q, s = _qw(n, 16)
        bias = None if i == 1 else g.constant(f"b{i}", rng.standard_normal(n).astype(np.float32))
        outs.append(g.op("linear_int8", x, g.constant(f"w{i}", q), g.constant(f"s{i}", s), bias))
    q, s = _qw(6, 16)
    h = g.op("linear_int8", x, g.constant("w_act", q), g.constant("s_act", s))  # its own key: silu after it
    for i, o in enumerate(outs):
        g.output(o, name=f"y{i}")
    g.output(g.op("silu", h), name="z")
    graph = g.build()
    rewritten = run_passes(graph, (fuse_linear_activation, merge_projections))
    ops = [n.op for n in rewritten.nodes]
    assert ops.count("linear_int8") == 2 and "silu" not in ops  # three merged into one; silu fused
    merged = next(n for n in rewritten.nodes if n.op == "linear_int8" and len(n.inputs) == 4
                  and rewritten.constants[n.inputs[1]].shape[0] == 25)
    assert rewritten.constants[merged.inputs[2]].shape == (25,)
    xv = rng.standard_normal((3, 16)).astype(np.float32)
    want = Executor(graph, passes=()).run({"x": xv})
    got = Executor(graph).run({"x": xv})
    for i in range(3):
        np.testing.assert_array_equal(got[f"y{i}"], want[f"y{i}"])
    np.testing.assert_allclose(got["z"], want["z"], rtol=1e-5, atol=1e-6)


def test_embedding_int8_rows_times_scales_plus_positions():
    q, s = _qw(10, 6)
    positions = rng.standard_normal((3, 6)).astype(np.float32)
    g = GraphBuilder("emb")
    ids = g.input("ids", dtype="int", ndim=2)
    g.output(g.op("embedding_int8", ids, g.constant("t", q), g.constant("s", s), g.constant("p", positions), scale=2.0),
             name="y")
    ex = Executor(g.build())
    idv = np.array([[0, 9, 4], [4, 4, 1]])
    want = q[idv].astype(np.float64) * (s[idv] * 2.0)[..., None] + positions
    np.testing.assert_allclose(ex.run({"ids": idv})["y"], want, rtol=1e-6, atol=1e-6)
    for bad in (10, -1):
        with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\)"):
            ex.run({"ids": np.array([[0, bad, 1]])})
