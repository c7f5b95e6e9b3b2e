"""linear_half with bf16 arithmetic (``arith="bfloat16"``, kernels/linear_half/native_bf16dot.h) in the
native replay: vdpbf16ps where this CPU has AVX512-BF16, the portable path at every variant this
host runs (in process, and under SEQJIT_ISA in a fresh process).

Two independent references: the NumPy reference (x rounded to bf16, exact products summed in
float64, rounded once), within the float32 summation bound; and an emulation of vdpbf16ps's
definition written here (per pair, acc += x[2i+1] * w[2i+1] then acc += x[2i] * w[2i] in float32),
which every path must equal bit for bit. The rounding itself against torch's float32 -> bfloat16
conversion (round to nearest even)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import seqjit
from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder, _native_vm
from seqjit.kernels import _isa
from seqjit.kernels.linear_half.packed import pack_bf16_pairs, unpack_bf16_pairs
from seqjit.kernels.linear_half.reference import round_bf16

narrow = kernels.get("narrow_half", "reference")
reference = kernels.get("linear_half", "reference")
U = 2.0 ** -24  # float32's unit roundoff
VARIANTS = [v for v in ("base", "avx2", "avx512") if v in
            {"base"} | ({"avx2"} if _isa._cpu_best() in ("avx2", "avx512") else set())
            | ({"avx512"} if _isa._cpu_best() == "avx512" else set())]


def _rng(seed):
    return np.random.default_rng(seed)


def weights(n, k, seed):
    return narrow((_rng(seed).standard_normal((n, k)) * 0.2).astype(np.float32), "bfloat16")


def widen(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def torch_round(x):
    """float32 -> bfloat16 -> float32 by torch (round to nearest even)."""
    return torch.from_numpy(np.ascontiguousarray(x)).to(torch.bfloat16).float().numpy()


def emulate(x, w, b=None):
    """vdpbf16ps's chain, written from its definition: x rounded (torch), float32 partial sums, per pair
    the odd element's product first; odd K padded with a zero pair element. Bias added last."""
    m, k = x.shape
    xr, wr = torch_round(x), widen(w)
    if k % 2:
        xr, wr = np.pad(xr, ((0, 0), (0, 1))), np.pad(wr, ((0, 0), (0, 1)))
    acc = np.zeros((m, w.shape[0]), np.float32)
    for i in range(0, xr.shape[1], 2):
        acc = acc + np.outer(xr[:, i + 1], wr[:, i + 1]).astype(np.float32)  # exact products, one rounding a step
        acc = acc + np.outer(xr[:, i], wr[:, i]).astype(np.float32)
    return acc if b is None else acc + b


def bound(x, w, b):
    """The float32 summation bound of K + 1 terms: (K + 1) u (sum |x_k w_k| + |b|)."""
    s = np.abs(torch_round(x)).astype(np.float64) @ np.abs(widen(w)).astype(np.float64).T
    if b is not None:
        s = s + np.abs(b)
    return (x.shape[1] + 1) * U * s + 1e-30


def native(x, w, b=None, act=None, arith="bfloat16"):
    g = GraphBuilder("one")
    g.output(g.op("linear_half", g.input("x", dtype="float"), g.constant("w", w),
                  None if b is None else g.constant("b", b), fmt="bfloat16", activation=act, arith=arith), name="y")
    ex = Executor(g.build(), passes=(), replay="native")
    out = ex.run({"x": x})["y"]
    plan = ex.plan_for({"x": x})
    assert plan.native and all(kind == "native" for _, _, kind in plan.native.low.labels), plan.native.low.labels
    return out


@pytest.fixture(params=["native"] + VARIANTS)
def path(request):
    """vdpbf16ps (where the CPU has it), then the portable path at each variant."""
    if request.param == "native":
        if _native_vm.bf16_isa() != "avx512bf16":
            pytest.skip("the CPU has no AVX512-BF16")  # the variant cannot run on this host
    else:
        assert _native_vm.linear_isa(request.param) == request.param
        _native_vm.bf16_native(False)
        assert _native_vm.bf16_isa() == request.param
    yield request.param
    _native_vm.bf16_native(True)
    _native_vm.linear_isa(None)


def test_this_host_runs_vdpbf16ps_where_it_has_avx512_bf16():
    with open("/proc/cpuinfo") as f:
        has = " avx512_bf16" in f.read()
    assert (_native_vm.bf16_isa() == "avx512bf16") == (has and _isa._cpu_best() == "avx512" and os.environ.get(
        "SEQJIT_ISA", "avx512") in ("", "avx512"))


@pytest.mark.parametrize("k,n", [(512, 40), (13, 7), (130, 33), (1100, 50), (1, 5), (2, 3), (300, 64)])
def test_every_path_equals_the_definition_and_the_reference(path, k, n):
    """M 67 (blocks of 14 and fewer rows), odd and even K (1100: several K chunks), N off the panels:
    the emulated vdpbf16ps bit for bit, and the float64 reference within the float32 summation bound."""
    w = weights(n, k, seed=k + n)
    x = _rng(k).standard_normal((67, k)).astype(np.float32)
    b = _rng(n).standard_normal(n).astype(np.float32)
    got = native(x, w, b)
    np.testing.assert_array_equal(got, emulate(x, w, b))
    ref = reference(x, w, b, fmt="bfloat16", arith="bfloat16")
    assert np.all(np.abs(got.astype(np.float64) - ref) <= bound(x, w, b) + U * np.abs(ref))


@pytest.mark.parametrize("k,n", [(512, 40), (37, 70), (131, 300)])
def test_a_rows_result_does_not_depend_on_the_row_count(path, k, n):
    """Every row count against 67 rows (blocks of 14 and fewer); up to 3 rows and N 300 the four-panel
    tile of few rows runs for the first 256 columns (then the one-panel tile), and equals the definition."""
    w = weights(n, k, seed=3)
    x = _rng(4).standard_normal((67, k)).astype(np.float32)
    full = native(x, w)
    np.testing.assert_array_equal(native(x[:3], w), emulate(x[:3], w))
    for m in (1, 2, 3, 5, 11, 13, 14, 15, 16, 29, 40):
        np.testing.assert_array_equal(native(x[:m], w), full[:m], err_msg=f"{m} rows")
    np.testing.assert_array_equal(native(x[30:33], w), full[30:33])


@pytest.mark.parametrize("act,bias", [("relu", False), ("gelu", True), ("silu", True)])
def test_activations_and_no_bias(path, act, bias):
    w = weights(70, 96, seed=5)
    x = _rng(6).standard_normal((16, 96)).astype(np.float32)
    b = _rng(7).standard_normal(70).astype(np.float32) if bias else None
    ref = reference(x, w, b, fmt="bfloat16", activation=act, arith="bfloat16")
    np.testing.assert_allclose(native(x, w, b, act), ref, rtol=2e-5, atol=2e-5)


def test_the_cost_of_rounding_x_is_bf16s():
    """Against the float32 products on the same bf16 weights: the difference is x's rounding, at most
    2^-9 of sum |x_k w_k| (half a bf16 unit), and visible."""
    w = weights(64, 512, seed=8)
    x = _rng(9).standard_normal((16, 512)).astype(np.float32)
    d = np.abs(native(x, w).astype(np.float64) - native(x, w, arith="float32"))
    s = np.abs(x).astype(np.float64) @ np.abs(widen(w)).astype(np.float64).T
    assert np.all(d <= 2.0 ** -9 * s + 2 * bound(x, w, None)) and d.max() > 100 * U * s.max()


@pytest.mark.parametrize("m,k,n", [(1, 512, 4099), (3, 256, 300), (67, 2048, 520), (17, 96, 64)])
def test_threads_and_team_give_the_same_bits(m, k, n, with_threads):
    w = weights(n, k, seed=m + n)
    x = _rng(10).standard_normal((m, k)).astype(np.float32)
    b = _rng(11).standard_normal(n).astype(np.float32)
    one = with_threads(1, lambda: native(x, w, b, "gelu"))
    np.testing.assert_array_equal(with_threads(2, lambda: native(x, w, b, "gelu")), one)


def test_rounding_special_values(path):
    """One-hot rows pick x's rounded value: ties to even (both directions), the largest values, inf,
    float32 subnormals read as zero (as vcvtne2ps2bf16), NaN stays NaN; bf16 subnormal weights zeroed."""
    xs = np.array([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -8 + 2 ** -20, -(1.0 + 2 ** -8), 3.4e38, -np.inf,
                   np.inf, 1e-39, -1e-39, 2 ** -126, 0.1, -7.3e-12, 0.0], np.float32)
    want = torch_round(xs)
    want[[7, 8]] = 0.0
    np.testing.assert_array_equal(round_bf16(xs), want)
    w = np.zeros((2, 41), np.float32)
    w[0, 0] = w[1, 35] = 1.0  # output 0 picks x[:, 0] (rounded 32 at a time), output 1 x[:, 35] (one by one)
    w = narrow(w, "bfloat16")
    for col in (0, 35):
        x = np.zeros((len(xs), 41), np.float32)
        x[:, col] = xs
        np.testing.assert_array_equal(native(x, w)[:, col // 35], want)
        x = np.zeros((1, 41), np.float32)
        x[0, col] = np.nan
        assert np.isnan(native(x, w)[0, col // 35])
    sub = np.array([[0x0001, 0x3F80, 0x8040]], np.uint16)  # a subnormal, 1.0, a negative subnormal
    np.testing.assert_array_equal(native(np.ones((2, 3), np.float32), sub), [[1.0], [1.0]])


def test_pair_panels_round_trip():
    for n, k in ((1, 9), (31, 8), (33, 1), (100, 17)):
        w = _rng(n).integers(0, 2 ** 16, (n, k)).astype(np.uint16)
        wp = pack_bf16_pairs(w)
        assert wp.shape == (-(-n // 32), (k + 1) // 2, 32) and wp.dtype == np.uint32 and wp.ctypes.data % 64 == 0
        flushed = np.where((w & 0x7F80) == 0, w & 0x8000, w)
        np.testing.assert_array_equal(unpack_bf16_pairs(wp, n, k), flushed)
        if k % 2:
            assert not (wp[:, -1, :] >> 16).any()  # the odd K's pad is zero
        assert n % 32 == 0 or not wp[-1, :, n % 32:].any()  # zero past N


def test_refusals():
    w16 = narrow(np.ones((4, 6), np.float32), "float16")
    x = np.ones((2, 6), np.float32)
    with pytest.raises(ValueError, match="arith 'bfloat16' needs bfloat16 weights"):
        reference(x, w16, fmt="float16", arith="bfloat16")
    with pytest.raises(ValueError, match="arith must be 'float32' or 'bfloat16', got 'int8'"):
        reference(x, w16, fmt="float16", arith="int8")
    for fmt, arith, msg in (("float16", "bfloat16", "arith 'bfloat16' needs bfloat16 weights"),
                            ("bfloat16", "fp8", "arith must be 'float32' or 'bfloat16', got 'fp8'")):
        g = GraphBuilder("bad")
        g.output(g.op("linear_half", g.input("x", dtype="float"), g.constant("w", w16), fmt=fmt, arith=arith), name="y")
        with pytest.raises(ValueError, match=msg):
            Executor(g.build(), passes=(), replay="native").run({"x": x})


PROBE = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_linear_half_bf16 as t
from seqjit.graph import _native_vm
ok = True
for m, k, n in ((1, 512, 70), (5, 37, 33), (17, 130, 20)):
    w = t.weights(n, k, seed=k)
    x = t._rng(m).standard_normal((m, k)).astype(np.float32)
    ok = ok and np.array_equal(t.native(x, w), t.emulate(x, w))
print(json.dumps({"bf16": _native_vm.bf16_isa(), "equal": bool(ok)}))
"""


@pytest.mark.parametrize("cap", ["baseline", "avx2"])
def test_seqjit_isa_caps_the_bf16_products(cap):
    """Under SEQJIT_ISA below avx512 a fresh process runs the portable path, with the same bits."""
    if cap == "avx2" and _isa._cpu_best() == "baseline":
        pytest.skip("the CPU has no AVX2")  # the variant cannot run on this host
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEQJIT_ISA", "NUMBA_CPU"))}
    env["SEQJIT_ISA"] = cap
    out = subprocess.run([sys.executable, "-c", PROBE, os.path.dirname(__file__)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"bf16": {"baseline": "base", "avx2": "avx2"}[cap], "equal": True}, got
