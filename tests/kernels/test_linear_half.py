"""linear_half (kernels/linear_half): 16-bit weights, float32 arithmetic, against PyTorch.

The conversions against torch's own bit patterns (``.half()`` and ``.to(torch.bfloat16)``, both
round to nearest even); the products against ``F.linear(x, w_half.float(), b)`` and the embedding
against ``F.embedding``; the graph ops through the Python executor; bad arguments by name.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder

FMTS = {"float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = dict(rtol=2e-5, atol=2e-5)
ref = lambda name: kernels.get(name, "reference")  # noqa: E731


def _rng(seed):
    return np.random.default_rng(seed)


def torch_bits(x: np.ndarray, fmt: str) -> np.ndarray:
    """torch's rounding of float32 ``x`` to ``fmt``, as uint16 bits."""
    return torch.from_numpy(x).to(FMTS[fmt]).view(torch.int16).numpy().view(np.uint16)


def torch_widen(bits: np.ndarray, fmt: str) -> np.ndarray:
    return torch.from_numpy(bits.view(np.int16)).view(FMTS[fmt]).float().numpy()


def half_weight(shape, fmt, seed, scale=0.2):
    """Random 16-bit weights (bits) and torch's tensor of them."""
    w = (_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    t = torch.from_numpy(w).to(FMTS[fmt])
    return t.view(torch.int16).numpy().view(np.uint16), t


def _hard_floats(seed) -> np.ndarray:
    """Finite float32 values that exercise the rounding: random bit patterns (every exponent),
    values exactly halfway between two 16-bit neighbours, fp16 subnormals and overflows."""
    rng = _rng(seed)
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    # halfway cases: a 16-bit value plus half its ulp (bf16: bit 15; fp16 via its own grid below)
    tie_bf16 = ((rng.integers(0, 2**16, 2000).astype(np.uint32) << 16) | 0x8000).view(np.float32)
    h = rng.integers(0, 0x7BFF, 2000).astype(np.uint16).view(np.float16).astype(np.float64)
    ulp = np.spacing(h.astype(np.float16)).astype(np.float64)
    tie_fp16 = (h + ulp / 2).astype(np.float32)  # exact in float32 (fp16 has 11 significant bits)
    sub = (rng.standard_normal(2000) * 2.0**-18).astype(np.float32)  # fp16 subnormals
    big = (rng.standard_normal(200) * 70000).astype(np.float32)  # fp16 overflow to inf
    edges = np.array([0.0, -0.0, 65504, 65519.99, 65520, -65520, 6.1035156e-05, 5.96e-08, 2.98e-08, 2.99e-08,
                      3.3895314e38, 3.4028235e38, -3.4028235e38, 1e-45, np.inf, -np.inf], np.float32)
    x = np.concatenate([x, tie_bf16[np.isfinite(tie_bf16)], tie_fp16, -tie_fp16, sub, big, edges])
    return x.astype(np.float32)


@pytest.mark.parametrize("fmt", FMTS)
def test_narrow_equals_torch_rounding(fmt):
    x = _hard_floats(1)
    np.testing.assert_array_equal(ref("narrow_half")(x, fmt), torch_bits(x, fmt))


@pytest.mark.parametrize("fmt", FMTS)
def test_narrow_keeps_nan_quiet_and_signed(fmt):
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FFFFFFF], np.uint32).view(np.float32)
    got = ref("narrow_half")(nans, fmt)
    wide = ref("widen_half")(got, fmt)
    assert np.isnan(wide).all()
    quiet = 0x0200 if fmt == "float16" else 0x0040
    assert (got & quiet).all(), [hex(v) for v in got]
    np.testing.assert_array_equal(got >> 15, nans.view(np.uint32) >> 31)


@pytest.mark.parametrize("fmt", FMTS)
def test_widen_every_pattern_equals_torch(fmt):
    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    got, want = ref("widen_half")(bits, fmt), torch_widen(bits, fmt)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    # and back: every non-NaN 16-bit value is a float32 that narrows to itself
    np.testing.assert_array_equal(ref("narrow_half")(got[~nan], fmt), bits[~nan])


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("m,k,n,act,bias", [(1, 13, 7, None, True), (3, 64, 33, "relu", False), (17, 130, 48, "gelu", True),
                                            (5, 40, 9, "silu", True), (2, 31, 65, "tanh", False), (4, 16, 8, "gelu_tanh", True)])
def test_linear_half_equals_torch(fmt, m, k, n, act, bias):
    bits, wt = half_weight((n, k), fmt, seed=m * 100 + k)
    x = _rng(k).standard_normal((m, k)).astype(np.float32)
    b = _rng(n).standard_normal(n).astype(np.float32) if bias else None
    y = F.linear(torch.from_numpy(x).double(), wt.double(), None if b is None else torch.from_numpy(b).double())
    y = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu, "tanh": torch.tanh,
         "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[act](y)
    got = ref("linear_half")(x, bits, b, fmt=fmt, activation=act)
    assert got.dtype == np.float32 and got.shape == (m, n)
    np.testing.assert_allclose(got, y.numpy(), **TOL)


def test_linear_half_batched_and_out():
    bits, wt = half_weight((6, 16), "bfloat16", seed=3)
    x = _rng(4).standard_normal((2, 3, 16)).astype(np.float32)
    out = np.empty((2, 3, 6), np.float32)
    got = ref("linear_half")(x, bits, fmt="bfloat16", out=out)
    assert got is out
    np.testing.assert_allclose(out, F.linear(torch.from_numpy(x), wt.float()).numpy(), **TOL)


@pytest.mark.parametrize("fmt", FMTS)
def test_embedding_half_equals_torch(fmt):
    bits, tt = half_weight((50, 24), fmt, seed=5, scale=1.0)
    ids = _rng(6).integers(0, 50, (3, 7))
    pos = _rng(7).standard_normal((7, 24)).astype(np.float32)
    want = F.embedding(torch.from_numpy(ids), tt.double()) * 4.9 + torch.from_numpy(pos).double()
    got = ref("embedding_half")(ids, bits, fmt=fmt, scale=4.9, positions=pos)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.numpy(), **TOL)
    plain = ref("embedding_half")(ids, bits, fmt=fmt)
    np.testing.assert_array_equal(plain, tt.float().numpy()[ids])


def _bad(fn, exc, match, *args, **kwargs):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_bad_arguments_are_named():
    lin, emb = ref("linear_half"), ref("embedding_half")
    x, w = np.ones((2, 4), np.float32), np.ones((3, 4), np.uint16)
    _bad(lin, ValueError, "fmt must be", x, w, fmt="half")
    _bad(lin, ValueError, "fmt must be", x, w, fmt=None)
    _bad(lin, TypeError, r"weight must hold the raw 16-bit.*view\(numpy.uint16\)", x, w.view(np.float16), fmt="float16")
    _bad(lin, TypeError, "weight must have dtype uint16", x, w.astype(np.float32), fmt="float16")
    _bad(lin, TypeError, "x must have dtype float32", x.astype(np.float64), w, fmt="float16")
    _bad(lin, ValueError, r"weight must have shape \[\*, 4\]", x, np.ones((3, 5), np.uint16), fmt="float16")
    _bad(lin, ValueError, "weight must have 2 dimensions", x, np.ones(4, np.uint16), fmt="float16")
    _bad(lin, ValueError, r"bias must have shape \[3\]", x, w, np.ones(4, np.float32), fmt="bfloat16")
    _bad(lin, TypeError, "bias must have dtype float32", x, w, np.ones(3), fmt="bfloat16")
    _bad(lin, ValueError, "activation must be", x, w, fmt="bfloat16", activation="swish")
    _bad(lin, ValueError, "out must be", x, w, fmt="bfloat16", out=np.empty((2, 4), np.float32))
    _bad(lin, TypeError, "fmt", x, w)  # fmt is required
    _bad(emb, ValueError, r"ids must lie in \[0, 3\)", np.array([0, 3]), w, fmt="float16")
    _bad(emb, TypeError, "table must have dtype uint16", np.array([0]), w.astype(np.float32), fmt="float16")
    _bad(emb, ValueError, "fmt must be", np.array([0]), w, fmt="fp16")
    _bad(emb, TypeError, "positions must have dtype float32", np.array([[0, 1]]), w, fmt="float16",
         positions=np.ones((2, 4)))
    _bad(ref("widen_half"), TypeError, "w must have dtype uint16", np.ones(3, np.int16), "float16")
    _bad(ref("narrow_half"), TypeError, "x must have dtype float32", np.ones(3), "bfloat16")


def test_registered():
    for op in ("linear_half", "embedding_half", "widen_half", "narrow_half"):
        assert "reference" in kernels.backends(op), op


@pytest.mark.parametrize("fmt", FMTS)
def test_graph_ops_in_the_python_executor(fmt):
    bits, wt = half_weight((20, 12), fmt, seed=8)
    tbits, tt = half_weight((30, 12), fmt, seed=9, scale=1.0)
    b = _rng(10).standard_normal(20).astype(np.float32)
    pos = _rng(11).standard_normal((5, 12)).astype(np.float32)
    g = GraphBuilder("half")
    e = g.op("embedding_half", g.input("ids", dtype="int"), g.constant("table", tbits), g.constant("pos", pos),
             fmt=fmt, scale=2.0)
    g.output(g.op("linear_half", e, g.constant("w", bits), g.constant("b", b), fmt=fmt, activation="relu",
                  name="proj"), name="y")
    ids = _rng(12).integers(0, 30, (2, 5))
    y = Executor(g.build(), replay="python").run({"ids": ids})["y"]
    emb = F.embedding(torch.from_numpy(ids), tt.float()) * 2.0 + torch.from_numpy(pos)
    want = F.relu(F.linear(emb, wt.float(), torch.from_numpy(b)))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, want.numpy(), **TOL)


def test_graph_op_shape_errors():
    from seqjit.errors import GraphError, ShapeError

    g = GraphBuilder("bad")
    g.output(g.op("linear_half", g.input("x", dtype="float"), g.constant("w", np.ones((3, 4), np.float32)),
                  fmt="float16"), name="y")
    with pytest.raises(ShapeError, match="weight must be uint16"):
        Executor(g.build(), replay="python").run({"x": np.ones((1, 4), np.float32)})
    g = GraphBuilder("bad_fmt")
    g.output(g.op("linear_half", g.input("x", dtype="float"), g.constant("w", np.ones((3, 4), np.uint16)),
                  fmt="fp8"), name="y")
    with pytest.raises(ShapeError, match="fmt must be"):
        Executor(g.build(), replay="python").run({"x": np.ones((1, 4), np.float32)})
    g = GraphBuilder("no_fmt")
    g.output(g.op("embedding_half", g.input("ids", dtype="int"), g.constant("t", np.ones((3, 4), np.uint16))), name="y")
    with pytest.raises(GraphError, match="needs attribute 'fmt'"):
        Executor(g.build(), replay="python").run({"ids": np.zeros(2, np.int64)})


def test_default_passes_merge_and_fuse_half_linears():
    """Q/K/V-like linear_half nodes of one fmt on one input merge into one product (weights
    concatenated), an activation fuses into it; nodes of another fmt stay apart; same results."""
    from seqjit.graph.passes import DEFAULT_PASSES, run_passes

    g = GraphBuilder("qkv")
    x = g.input("x", dtype="float")
    outs = []
    for i, fmt in enumerate(["bfloat16", "bfloat16", "bfloat16", "float16"]):
        bits, _ = half_weight((8 + i, 12), fmt, seed=20 + i)
        b = g.constant(f"b{i}", _rng(i).standard_normal(8 + i).astype(np.float32)) if i != 1 else None
        outs.append(g.op("linear_half", x, g.constant(f"w{i}", bits), b, fmt=fmt))
    for i, o in enumerate(outs):
        g.output(g.op("relu", o) if i == 3 else o, name=f"y{i}")
    graph = g.build()
    optimized = run_passes(graph, DEFAULT_PASSES)
    halves = [n for n in optimized.nodes if n.op == "linear_half"]
    assert sorted((n.attrs["fmt"], n.attrs["activation"]) for n in halves) == [("bfloat16", None), ("float16", "relu")]
    assert optimized.constants[halves[0].inputs[1]].shape == (8 + 9 + 10, 12)
    feeds = {"x": _rng(30).standard_normal((3, 12)).astype(np.float32)}
    plain = Executor(graph, passes=(), replay="python").run(feeds)
    fused = Executor(graph, replay="python").run(feeds)
    for name in plain:
        np.testing.assert_allclose(fused[name], plain[name], rtol=1e-6, atol=1e-6, err_msg=name)
