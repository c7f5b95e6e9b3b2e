"""linear_half and embedding_half in the native replay (kernels/linear_half/native_half.h, _native.pxi):
every instruction-set variant this host runs (forced in process through ``_native_vm.linear_isa``,
and through ``SEQJIT_ISA`` in a fresh process) against the NumPy reference; each row's result
identical at every row count 1..17 and at 1 or 2 threads (the team and OpenMP splits); odd K and N;
every path bit for bit the packed float32 kernel's on the widened weights."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import seqjit
from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder, _native_vm
from seqjit.kernels import _isa

FMTS = ("float16", "bfloat16")
TOL = dict(rtol=2e-5, atol=2e-5)
narrow = kernels.get("narrow_half", "reference")
VARIANTS = [v for v in ("base", "avx2", "avx512") if v in
            {"base"} | ({"avx2"} if _isa._cpu_best() in ("avx2", "avx512") else set())
            | ({"avx512"} if _isa._cpu_best() == "avx512" else set())]


def _rng(seed):
    return np.random.default_rng(seed)


def weights(n, k, fmt, seed):
    return narrow((_rng(seed).standard_normal((n, k)) * 0.2).astype(np.float32), fmt)


def native(build, feeds):
    """Run a one-op graph natively; check it lowered with no Python callback instruction."""
    g = GraphBuilder("one")
    build(g)
    ex = Executor(g.build(), passes=(), replay="native")
    out = ex.run(feeds)["y"]
    plan = ex.plan_for(feeds)
    assert plan.native and all(kind == "native" for _, _, kind in plan.native.low.labels), plan.native.low.labels
    return out


def linear_half(x, w, b, fmt, act=None):
    def build(g):
        g.output(g.op("linear_half", g.input("x", dtype="float"), g.constant("w", w),
                      None if b is None else g.constant("b", b), fmt=fmt, activation=act), name="y")
    return native(build, {"x": x})


@pytest.fixture(params=VARIANTS)
def variant(request):
    assert _native_vm.linear_isa(request.param) == request.param
    assert _native_vm.half_isa() == request.param
    yield request.param
    _native_vm.linear_isa(None)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("k,n", [(512, 40), (13, 7), (130, 33), (1100, 5), (64, 1), (4099, 3), (2048, 96)])
def test_every_row_count_equals_the_reference_and_each_other(variant, fmt, k, n):
    """Rows 1..17 (the one-row kernel, the widened blocks, several 16-row passes): each within float32
    rounding of the reference, and each row's result the same bits at every row count."""
    w = weights(n, k, fmt, seed=k + n)
    x = _rng(k).standard_normal((17, k)).astype(np.float32)
    b = _rng(n).standard_normal(n).astype(np.float32)
    full = linear_half(x, w, b, fmt)
    np.testing.assert_allclose(full, kernels.get("linear_half", "reference")(x, w, b, fmt=fmt), **TOL)
    for m in range(1, 17):
        np.testing.assert_array_equal(linear_half(x[:m], w, b, fmt), full[:m], err_msg=f"{m} rows")
    np.testing.assert_array_equal(linear_half(x[5:6], w, b, fmt), full[5:6])


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("act,bias", [("relu", False), ("gelu", True), ("silu", True), ("tanh", False), ("gelu_tanh", True)])
def test_activations_and_no_bias(variant, fmt, act, bias):
    w = weights(70, 96, fmt, seed=3)
    x = _rng(4).standard_normal((3, 96)).astype(np.float32)
    b = _rng(5).standard_normal(70).astype(np.float32) if bias else None
    ref = kernels.get("linear_half", "reference")(x, w, b, fmt=fmt, activation=act)
    np.testing.assert_allclose(linear_half(x, w, b, fmt, act), ref, **TOL)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("m", [1, 2, 5, 7, 16, 17])
@pytest.mark.parametrize("k,n", [(80, 48), (1100, 40), (37, 70)])
def test_rows_equal_the_packed_float_kernel_bit_for_bit(variant, monkeypatch, fmt, m, k, n):
    """Every path (converted in registers up to 16 rows, widened panels past them) sums as the
    packed float32 kernel does: the native float linear over ``widen(W)``, made to take its packed
    kernel, gives the same bits (K 1100: the packed kernel's K blocks)."""
    from seqjit.graph import kernel_choice

    monkeypatch.setattr(kernel_choice, "choose", lambda *args, **kwargs: "packed")
    w = weights(n, k, fmt, seed=6)
    wf = kernels.get("widen_half", "reference")(w, fmt)
    x = _rng(7).standard_normal((m, k)).astype(np.float32)
    b = _rng(8).standard_normal(n).astype(np.float32)

    def build(g):
        g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", wf), g.constant("b", b)), name="y")

    np.testing.assert_array_equal(linear_half(x, w, b, fmt), native(build, {"x": x}))


def test_panels_round_trip():
    from seqjit.kernels.linear_half.packed import pack_half_panels, unpack_half_panels

    for n in (1, 31, 32, 33, 100):
        w = _rng(n).integers(0, 2**16, (n, 9)).astype(np.uint16)
        wp = pack_half_panels(w)
        assert wp.shape == (-(-n // 32), 9, 32) and wp.ctypes.data % 64 == 0
        np.testing.assert_array_equal(unpack_half_panels(wp, n), w)
        assert n % 32 == 0 or not wp[-1, :, n % 32:].any()  # zero (+0.0) past N


def test_a_computed_weight_runs_as_a_callback():
    """A weight computed in the graph has no panels: the node runs through the Python kernel."""
    w = weights(8, 16, "float16", seed=1)
    g = GraphBuilder("computed")
    wv = g.op("identity", g.input("w", dtype="any"))
    g.output(g.op("linear_half", g.input("x", dtype="float"), wv, fmt="float16"), name="y")
    x = _rng(2).standard_normal((2, 16)).astype(np.float32)
    y = Executor(g.build(), passes=(), replay="native").run({"x": x, "w": w})["y"]
    np.testing.assert_allclose(y, kernels.get("linear_half", "reference")(x, w, fmt="float16"), **TOL)


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("m,k,n", [(1, 512, 4099), (1, 512, 200), (3, 256, 300), (17, 2048, 520), (17, 96, 64)])
def test_threads_and_team_give_the_same_bits(fmt, m, k, n):
    """1 thread, then 2 (the team of two for the mid-sized products, OpenMP column blocks from
    PARALLEL_MACS): identical results."""
    w = weights(n, k, fmt, seed=m + n)
    x = _rng(8).standard_normal((m, k)).astype(np.float32)
    b = _rng(9).standard_normal(n).astype(np.float32)
    before = seqjit.get_num_threads()
    try:
        seqjit.set_num_threads(1)
        one = linear_half(x, w, b, fmt, "gelu")
        seqjit.set_num_threads(2)
        two = linear_half(x, w, b, fmt, "gelu")
    finally:
        seqjit.set_num_threads(before)
    np.testing.assert_array_equal(two, one)
    np.testing.assert_allclose(one, kernels.get("linear_half", "reference")(x, w, b, fmt=fmt, activation="gelu"), **TOL)


@pytest.mark.parametrize("fmt", FMTS)
def test_embedding_half(fmt):
    table = weights(40, 19, fmt, seed=10)
    ids = _rng(11).integers(0, 40, (3, 5))
    pos = _rng(12).standard_normal((5, 19)).astype(np.float32)

    def build(g):
        g.output(g.op("embedding_half", g.input("ids", dtype="int"), g.constant("t", table), g.constant("p", pos),
                      fmt=fmt, scale=2.5), name="y")

    ref = kernels.get("embedding_half", "reference")(ids, table, fmt=fmt, scale=2.5, positions=pos)
    np.testing.assert_allclose(native(build, {"ids": ids}), ref, **TOL)

    def plain(g):
        g.output(g.op("embedding_half", g.input("ids", dtype="int"), g.constant("t", table), fmt=fmt), name="y")

    np.testing.assert_array_equal(native(plain, {"ids": ids}), kernels.get("widen_half", "reference")(table, fmt)[ids])
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 40\)"):
        native(plain, {"ids": np.array([[1, 40]])})


def test_special_values_widen_exactly():
    """fp16 subnormals, infinities and the largest values through the native one-row and widened
    paths: the products of one-hot rows pick single weights, so they must come out exact."""
    bits = np.array([0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x8001, 0x3C00, 0x7C00, 0xFC00, 0x0000, 0x8000,
                     0x3555, 0x1234, 0x4567, 0xC0DE, 0x2001], np.uint16)
    for fmt in FMTS:
        w = np.ascontiguousarray(np.tile(bits, (3, 1)).T)  # [16, 3]: column j of x picks w[:, j]
        wide = kernels.get("widen_half", "reference")(w, fmt)
        for m in (1, 3):
            x = np.zeros((m, 3), np.float32)
            x[:, 1] = 1.0
            got = linear_half(x, w, None, fmt)
            finite = np.isfinite(wide[:, 1])
            np.testing.assert_array_equal(got[0][finite], wide[:, 1][finite])


PROBE = r"""
import json
import numpy as np
from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder, _native_vm
rng = np.random.default_rng(0)
worst = 0.0
for fmt in ("float16", "bfloat16"):
    for m, k, n in ((1, 512, 70), (5, 37, 33), (17, 130, 20)):
        w = kernels.get("narrow_half", "reference")((rng.standard_normal((n, k)) * 0.2).astype(np.float32), fmt)
        x = rng.standard_normal((m, k)).astype(np.float32)
        g = GraphBuilder("one")
        g.output(g.op("linear_half", g.input("x", dtype="float"), g.constant("w", w), fmt=fmt), name="y")
        y = Executor(g.build(), passes=(), replay="native").run({"x": x})["y"]
        ref = kernels.get("linear_half", "reference")(x, w, fmt=fmt)
        worst = max(worst, float(np.max(np.abs(y - ref) / (2e-5 + 2e-5 * np.abs(ref)))))
print(json.dumps({"half": _native_vm.half_isa(), "vm": _native_vm.isa(), "worst": worst}))
"""


@pytest.mark.parametrize("cap", ["baseline", "avx2"])
def test_seqjit_isa_caps_the_half_kernels(cap):
    """In a fresh process under SEQJIT_ISA, the half kernels run the capped variant (as the float
    GEMV's) and agree with the reference."""
    best = _isa._cpu_best()
    if cap == "avx2" and best == "baseline":
        pytest.skip("the CPU has no AVX2")  # the variant cannot run on this host
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEQJIT_ISA", "NUMBA_CPU"))}
    env["SEQJIT_ISA"] = cap
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    want = {"baseline": "base", "avx2": "avx2"}[cap]
    assert got["half"] == want and got["vm"] == want, got
    assert got["worst"] <= 1.0, got


@pytest.mark.parametrize("fmt", FMTS)
def test_a_small_model_graph_runs_natively_as_in_python(fmt):
    """embedding_half -> linear_half (gelu) -> two linear_half on one input (merged by the default
    passes): every node native, the results the Python replay's within float32 rounding."""
    table, w1 = weights(30, 24, fmt, seed=20), weights(40, 24, fmt, seed=21)
    wq, wk = weights(24, 40, fmt, seed=22), weights(24, 40, fmt, seed=23)
    b1 = _rng(24).standard_normal(40).astype(np.float32)
    g = GraphBuilder("mlp")
    e = g.op("embedding_half", g.input("ids", dtype="int"), g.constant("t", table), fmt=fmt, scale=2.0)
    h = g.op("gelu", g.op("linear_half", e, g.constant("w1", w1), g.constant("b1", b1), fmt=fmt))
    q = g.op("linear_half", h, g.constant("wq", wq), fmt=fmt)
    k = g.op("linear_half", h, g.constant("wk", wk), fmt=fmt)
    g.output(q, name="y")
    g.output(k, name="z")
    graph = g.build()
    ids = _rng(25).integers(0, 30, (2, 5))
    nat = Executor(graph, replay="native")
    got = nat.run({"ids": ids})
    plan = nat.plan_for({"ids": ids})
    assert plan.native and all(kind == "native" for _, _, kind in plan.native.low.labels), plan.native.low.labels
    assert sum(n.op == "linear_half" for n in plan.graph.nodes) == 2  # merged q/k, gelu fused
    want = Executor(graph, replay="python").run({"ids": ids})
    for name in ("y", "z"):
        np.testing.assert_allclose(got[name], want[name], **TOL)
