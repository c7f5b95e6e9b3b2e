"""linear_half and embedding_half on the GPU path (kernels/linear_half/cuda.py), on a GPU or numba's
CUDA simulator: the device bit conversion of every class of 16-bit value (normals, fp16 subnormals,
zeros, infinities, NaN) against the NumPy reference, device arrays in and out, and the graph ops on
the device executor. (Host arrays in, against the reference, are in tests/kernels/test_backend_ops.py.)"""
import numpy as np
import pytest

from seqjit import kernels

from .conftest import cuda_or_skip

FMTS = ("float16", "bfloat16")


@pytest.fixture(scope="module")
def cu():
    cuda_or_skip()
    from seqjit.kernels import _cuda
    from seqjit.kernels.linear_half import cuda as half_cuda

    return _cuda, half_cuda


@pytest.mark.parametrize("fmt", FMTS)
def test_device_widening_is_exact(cu, fmt):
    _cuda, half = cu
    rng = np.random.default_rng(1)
    special = [0x0000, 0x8000, 0x0001, 0x8001, 0x0200, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0x7C00, 0xFC00, 0x7E00,
               0x7C01, 0xFFFF, 0x7F80, 0xFF80, 0x7FC0, 0x0080, 0x007F, 0x3F80]
    bits = np.concatenate([special, rng.integers(0, 2**16, 236)]).astype(np.uint16).reshape(16, 16)
    got = half.widen_device(bits, kernels.linear_half.spec.FORMATS[fmt]).copy_to_host()
    want = kernels.get("widen_half", "reference")(bits, fmt)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_device_arrays_in_and_out(cu):
    _cuda, half = cu
    rng = np.random.default_rng(2)
    w = kernels.get("narrow_half", "reference")(rng.standard_normal((20, 24)).astype(np.float32) / 5, "bfloat16")
    x = rng.standard_normal((3, 24)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    got = half.linear_half(_cuda.to_device(x), _cuda.to_device(w), _cuda.to_device(b), fmt="bfloat16",
                           activation="gelu")
    assert _cuda.is_device_array(got)
    want = kernels.get("linear_half", "reference")(x, w, b, fmt="bfloat16", activation="gelu")
    np.testing.assert_allclose(got.copy_to_host(), want, rtol=2e-5, atol=2e-5)
    table = kernels.get("narrow_half", "reference")(rng.standard_normal((9, 8)).astype(np.float32), "float16")
    ids = np.array([[0, 8, 3]])
    got = half.embedding_half(_cuda.to_device(ids), _cuda.to_device(table), fmt="float16", scale=3.0)
    np.testing.assert_allclose(got.copy_to_host(),
                               kernels.get("embedding_half", "reference")(ids, table, fmt="float16", scale=3.0),
                               rtol=1e-6)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 9\)"):
        half.embedding_half(_cuda.to_device(np.array([9])), table, fmt="float16")
    with pytest.raises(ValueError, match="fmt must be"):
        half.linear_half(x, w, fmt="half")
    with pytest.raises(TypeError, match="weight must have dtype uint16"):
        half.linear_half(x, w.astype(np.float32), fmt="bfloat16")


def test_graph_ops_on_the_device_executor(cu):
    from seqjit.graph import Executor, GraphBuilder
    from seqjit.graph.device_plan import DevicePlacement

    rng = np.random.default_rng(3)
    fmt = "float16"
    narrow = kernels.get("narrow_half", "reference")
    table = narrow(rng.standard_normal((12, 16)).astype(np.float32), fmt)
    w = narrow(rng.standard_normal((10, 16)).astype(np.float32) / 4, fmt)
    g = GraphBuilder("half")
    e = g.op("embedding_half", g.input("ids", dtype="int"), g.constant("t", table), fmt=fmt, scale=2.0)
    g.output(g.op("linear_half", e, g.constant("w", w), fmt=fmt, activation="relu"), name="y")
    ids = rng.integers(0, 12, (2, 3))
    y = Executor(g.build(), backend="cuda", device=DevicePlacement()).run({"ids": ids})["y"]
    y = y.copy_to_host() if hasattr(y, "copy_to_host") else y
    ref = kernels.get("linear_half", "reference")
    want = ref(kernels.get("embedding_half", "reference")(ids, table, fmt=fmt, scale=2.0), w, fmt=fmt, activation="relu")
    np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-5)


def test_bf16_arithmetic_on_the_device(cu):
    """arith="bfloat16": x rounded on the device bit for bit as the reference rounds it (ties, the
    largest values, subnormals to zero, inf), bf16 subnormal weights zeroed, and the product within
    the float32 summation bound of the reference's (the device linear sums in its own order)."""
    _cuda, half = cu
    from seqjit.kernels.linear_half.reference import round_bf16

    xs = np.array([[1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -(1.0 + 2 ** -8), 3.4e38, -np.inf, 1e-39, -1e-39, 2 ** -126,
                    0.1, -7.3e-12, 0.0, 5.5]], np.float32)
    np.testing.assert_array_equal(half.round_bf16_device(xs).copy_to_host().view(np.uint32), round_bf16(xs).view(np.uint32))
    rng = np.random.default_rng(3)
    k, n = 37, 20
    w = kernels.get("narrow_half", "reference")((rng.standard_normal((n, k)) * 0.2).astype(np.float32), "bfloat16")
    w[0, 0] = 0x0001  # a subnormal: zero for the bf16 products
    x = rng.standard_normal((2, 3, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    got = half.linear_half(x, w, b, fmt="bfloat16", arith="bfloat16")
    got = got.copy_to_host() if _cuda.is_device_array(got) else got
    ref = kernels.get("linear_half", "reference")(x, w, b, fmt="bfloat16", arith="bfloat16")
    wide = kernels.get("widen_half", "reference")(w, "bfloat16")
    s = np.abs(round_bf16(x)).astype(np.float64) @ np.abs(wide).astype(np.float64).T + np.abs(b)
    assert got.shape == (2, 3, n) and np.all(np.abs(got - ref) <= (k + 1) * 2.0 ** -24 * s * 1.01)
    with pytest.raises(ValueError, match="arith 'bfloat16' needs bfloat16 weights"):
        half.linear_half(x, w, b, fmt="float16", arith="bfloat16")
