"""linear (GEMM + bias + fused activation): the reference against PyTorch, every backend against the
reference, for both weight layouts and every activation."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjit import kernels
from seqjit.kernels.linear import reference as ref

ACTIVATIONS = [None, "relu", "gelu", "gelu_tanh", "silu", "tanh"]
TORCH_ACT = {
    None: lambda t: t,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "tanh": torch.tanh,
}
EPS32 = float(np.finfo(np.float32).eps)


def _data(m, k, n, dtype, seed=0, lead=()):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*lead, m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)  # [N, K]: PyTorch's layout
    b = rng.standard_normal(n).astype(dtype)
    return x, w, b


def _weight(w, layout):
    return w if layout == "out_in" else np.ascontiguousarray(w.T)


def _atol(x, w, dtype):
    """float32 GEMM rounding: a few eps times sqrt(K) times the largest sum of |x_k w_k| (the
    activations have slope at most ~1.13, so this bounds the error after them too)."""
    if dtype == np.float64:
        return 1e-12
    if x.size == 0 or w.size == 0:
        return 1e-7
    k = x.shape[-1]
    mag = float((np.abs(x.reshape(-1, x.shape[-1])) @ np.abs(w).T).max(initial=1.0))
    return 4 * EPS32 * np.sqrt(k) * mag


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_reference_matches_torch(dtype, activation):
    x, w, b = _data(7, 33, 19, dtype, lead=(2,))
    want = TORCH_ACT[activation](F.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b))).numpy()
    atol = 1e-12 if dtype == np.float64 else _atol(x, w, dtype) + 1e-6  # + torch's gelu/silu approximations
    for layout in ("out_in", "in_out"):
        got = ref.linear(x, _weight(w, layout), b, activation=activation, weight_layout=layout)
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=atol)
    no_bias = TORCH_ACT[activation](F.linear(torch.from_numpy(x), torch.from_numpy(w))).numpy()
    np.testing.assert_allclose(ref.linear(x, w, activation=activation), no_bias, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=atol)


# (M, K, N): ones, odd sizes, both sides of the cuda 64 x 64 x 16 tile, the CPU row blocks
CPU_SHAPES = [(1, 1, 1), (1, 33, 19), (3, 17, 65), (17, 19, 33), (65, 20, 3), (2, 300, 37), (1500, 16, 96)]
SIM_SHAPES = [(1, 1, 1), (17, 19, 33), (3, 17, 65), (65, 20, 3)]


@pytest.mark.parametrize("layout", ["out_in", "in_out"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_backend_matches_reference(backend, activation, layout, on_simulator):
    shapes = SIM_SHAPES if (backend == "cuda" and on_simulator) else CPU_SHAPES
    if backend == "cuda" and on_simulator:
        # the simulator runs a 64 x 64 tile as 256 Python threads: one shape per (activation, layout)
        shapes = [shapes[(ACTIVATIONS.index(activation) * 2 + (layout == "in_out")) % len(shapes)]]
    f = kernels.get("linear", backend=backend)
    for i, (m, k, n) in enumerate(shapes):
        for dtype in [np.float32] if backend == "cuda" else [np.float32, np.float64]:
            x, w, b = _data(m, k, n, dtype, seed=i)
            bias = b if (i + (layout == "in_out")) % 2 == 0 else None
            wl = _weight(w, layout)
            want = ref.linear(x, wl, bias, activation=activation, weight_layout=layout)
            got = f(x, wl, bias, activation=activation, weight_layout=layout)
            assert got.shape == (m, n) and got.dtype == dtype
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=_atol(x, w, dtype))


# The CPU kernels' blocking (numba and cython): one row (BLAS GEMV, or numba's dot loop over the
# rows of a wide "out_in" weight), row blocks, and column blocks in row tiles for outputs so wide that
# a row block would be only a few rows (a vocabulary projection). At the default block sizes, then
# with the constants shrunk so that small shapes land on both sides of every boundary.
DEFAULT_BLOCKING_SHAPES = [(1, 64, 40000), (16, 8, 40000), (600, 8, 9000), (70, 8, 4000), (3, 8, 70000)]
SMALL_BLOCKS = dict(BLOCK_BYTES=4096, MIN_BLOCK_ROWS=8, TILE_ROWS=5, MIN_BLOCK_COLS=16)
SMALL_BLOCKS_MODULE = {"numba": ("numba_cpu", dict(SMALL_BLOCKS, DOT_MIN_BYTES=320)), "cython": ("cython_cpu", SMALL_BLOCKS)}
SMALL_BLOCKING_SHAPES = [(1, 5, 15), (1, 5, 16), (1, 5, 17), (2, 7, 300), (12, 7, 300), (9, 3, 203), (9, 3, 204),
                         (9, 3, 205), (5, 4, 1025), (11, 6, 33), (40, 7, 100), (41, 7, 102), (8, 9, 129)]


def _check_blocking(f, shapes, layout, dtype):
    for i, (m, k, n) in enumerate(shapes):
        x, w, b = _data(m, k, n, dtype, seed=i)
        wl = _weight(w, layout)
        # no epilogue; then bias and/or an activation
        for bias, activation in ((None, None), (b if i % 3 != 1 else None, ACTIVATIONS[1 + i % (len(ACTIVATIONS) - 1)])):
            want = ref.linear(x, wl, bias, activation=activation, weight_layout=layout)
            out = np.full((m, n), np.nan, dtype)  # every element must be written
            assert f(x, wl, bias, activation=activation, weight_layout=layout, out=out) is out
            np.testing.assert_allclose(out, want, rtol=2e-5, atol=_atol(x, w, dtype),
                                       err_msg=f"{(m, k, n)} bias {bias is not None} {activation}")


@pytest.mark.parametrize("cpu_backend", ["numba", "cython"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["out_in", "in_out"])
def test_cpu_blocking_default_sizes(cpu_backend, dtype, layout):
    _check_blocking(kernels.get("linear", backend=cpu_backend), DEFAULT_BLOCKING_SHAPES, layout, dtype)


@pytest.mark.parametrize("cpu_backend", ["numba", "cython"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["out_in", "in_out"])
def test_cpu_blocking_small_blocks(cpu_backend, dtype, layout, monkeypatch):
    import importlib

    name, constants = SMALL_BLOCKS_MODULE[cpu_backend]
    module = importlib.import_module(f"seqjit.kernels.linear.{name}")
    for name, value in constants.items():
        monkeypatch.setattr(module, name, value)
    _check_blocking(module.linear, SMALL_BLOCKING_SHAPES, layout, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numba_one_row_dot_loop_every_activation(dtype, monkeypatch):
    from seqjit.kernels.linear import numba_cpu

    monkeypatch.setattr(numba_cpu, "DOT_MIN_BYTES", 1)
    for i, activation in enumerate(ACTIVATIONS):
        x, w, b = _data(1, 70, 130, dtype, seed=i)
        for bias in (b, None):
            want = ref.linear(x, w, bias, activation=activation)
            np.testing.assert_allclose(numba_cpu.linear(x, w, bias, activation=activation), want, rtol=2e-5,
                                       atol=_atol(x, w, dtype), err_msg=str(activation))


def test_leading_dims_out_and_edge_sizes(backend):
    f = kernels.get("linear", backend=backend)
    x, w, b = _data(3, 5, 4, np.float32, lead=(2,))
    out = np.empty((2, 3, 4), np.float32)
    assert f(x, w, b, activation="relu", out=out) is out
    np.testing.assert_allclose(out, ref.linear(x, w, b, activation="relu"), rtol=2e-5, atol=_atol(x, w, np.float32))
    # K = 0: the product is 0, the result is activation(bias)
    x0 = np.zeros((2, 0), np.float32)
    np.testing.assert_allclose(f(x0, np.zeros((4, 0), np.float32), b, activation="gelu"), ref.linear(x0, np.zeros((4, 0), np.float32), b, activation="gelu"), rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(f(x0, np.zeros((0, 4), np.float32), weight_layout="in_out"), np.zeros((2, 4), np.float32))
    # M = 0 and N = 0: empty results of the right shape
    assert f(np.zeros((0, 5), np.float32), w).shape == (0, 4)
    assert f(x, np.zeros((0, 5), np.float32)).shape == (2, 3, 0)


def test_cuda_device_arrays_stay_on_device():
    if "cuda" not in kernels.backends("linear"):
        pytest.skip("no GPU and no CUDA simulator")
    from seqjit.kernels._cuda import is_device_array, to_device

    x, w, b = _data(2, 9, 5, np.float32)
    y = kernels.get("linear", backend="cuda")(to_device(x), to_device(w), to_device(b), activation="silu")
    assert is_device_array(y)
    np.testing.assert_allclose(y.copy_to_host(), ref.linear(x, w, b, activation="silu"), rtol=2e-5, atol=_atol(x, w, np.float32))


# The cuda GEMV path (M <= 16 rows, a decode step): 32 lanes along K ("out_in", 4 columns a block) or
# along N ("in_out", 8 slices of K); shapes on both sides of those sizes and of M = 16 / 17.
GEMV_SHAPES = [(1, 1, 1), (1, 31, 5), (2, 33, 4), (16, 70, 33), (5, 8, 40), (16, 65, 3)]


@pytest.mark.parametrize("layout", ["out_in", "in_out"])
def test_cuda_gemv_path_for_few_rows(layout, monkeypatch):
    if "cuda" not in kernels.backends("linear"):
        pytest.skip("no GPU and no CUDA simulator")
    from seqjit.kernels.linear import cuda as linear_cuda

    class NoGemm:  # the tiled GEMM must not run for M <= GEMV_MAX_ROWS
        def __getitem__(self, launch):
            raise AssertionError("tiled GEMM launched")

    monkeypatch.setattr(linear_cuda, "_gemm_bias_act", NoGemm())
    assert linear_cuda.GEMV_MAX_ROWS == 16
    for i, (m, k, n) in enumerate(GEMV_SHAPES):
        x, w, b = _data(m, k, n, np.float32, seed=20 + i)
        bias = b if i % 2 == 0 else None
        activation = ACTIVATIONS[i % len(ACTIVATIONS)]
        wl = _weight(w, layout)
        want = ref.linear(x, wl, bias, activation=activation, weight_layout=layout)
        out = np.full((m, n), np.nan, np.float32)  # every element must be written
        assert linear_cuda.linear(x, wl, bias, activation=activation, weight_layout=layout, out=out) is out
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=_atol(x, w, np.float32), err_msg=f"{(m, k, n)}")
    x, w, b = _data(17, 3, 2, np.float32)
    with pytest.raises(AssertionError, match="tiled GEMM launched"):  # 17 rows: the tiled GEMM
        linear_cuda.linear(x, _weight(w, layout), weight_layout=layout)


def test_cuda_gemv_device_arrays_one_row():
    """A decode step's shape: one row in, device arrays in and out."""
    if "cuda" not in kernels.backends("linear"):
        pytest.skip("no GPU and no CUDA simulator")
    from seqjit.kernels._cuda import device_empty, to_device

    x, w, b = _data(1, 40, 9, np.float32, seed=3)
    dout = device_empty((1, 9), np.float32)
    f = kernels.get("linear", backend="cuda")
    assert f(to_device(x), to_device(w), to_device(b), activation="relu", out=dout) is dout
    np.testing.assert_allclose(dout.copy_to_host(), ref.linear(x, w, b, activation="relu"), rtol=2e-5,
                               atol=_atol(x, w, np.float32))


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(0, 40),
    k=st.integers(0, 70),
    n=st.integers(1, 70),
    layout=st.sampled_from(["out_in", "in_out"]),
    activation=st.sampled_from(ACTIVATIONS),
    has_bias=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_numba_and_cython_match_reference_property(m, k, n, layout, activation, has_bias, seed):
    x, w, b = _data(m, k, n, np.float32, seed)
    bias = b if has_bias else None
    want = ref.linear(x, _weight(w, layout), bias, activation=activation, weight_layout=layout)
    for backend in ("numba", "cython"):
        got = kernels.get("linear", backend=backend)(x, _weight(w, layout), bias, activation=activation, weight_layout=layout)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=_atol(x, w, np.float32) + 2e-6)


def test_strided_and_unusual_arguments(backend):
    """Arguments the kernels' quick argument check passes on to the full one: strided and Fortran
    arrays (copied), a list activation name (refused), read-only or strided ``out`` (refused)."""
    f = kernels.get("linear", backend=backend)
    x, w, b = _data(6, 10, 7, np.float32)
    want = ref.linear(x[:, ::2], w[:, ::2], b[::-1], activation="tanh")
    got = f(x[:, ::2], np.asfortranarray(w[:, ::2]), b[::-1].copy() if backend == "cuda" else b[::-1], activation="tanh")
    if backend == "cuda":
        got = got.copy_to_host() if hasattr(got, "copy_to_host") else got
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=_atol(x[:, ::2], w[:, ::2], np.float32))
    with pytest.raises(ValueError, match="activation must be one of"):
        f(x, w, activation=["relu"])
    if backend == "cuda":
        return
    frozen = np.empty((6, 7), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out must be a writeable C-contiguous"):
        f(x, w, out=frozen)
    with pytest.raises(ValueError, match="out must be a writeable C-contiguous"):
        f(x, w, out=np.empty((6, 14), np.float32)[:, ::2])


def test_bad_input_is_named(backend):
    f = kernels.get("linear", backend=backend)
    x = np.zeros((2, 4), np.float32)
    w = np.zeros((3, 4), np.float32)
    with pytest.raises(TypeError, match="x must have dtype"):
        f(np.zeros((2, 4), np.int32), w)
    with pytest.raises(TypeError, match="weight must be a numpy.ndarray"):
        f(x, [[1.0] * 4])
    with pytest.raises(ValueError, match="x must have at least 1 dimension"):
        f(np.ones((), np.float32), w)
    with pytest.raises(ValueError, match=r"weight must have shape \[\*, 4\]"):
        f(x, np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match=r"weight must have shape \[4, \*\]"):
        f(x, w, weight_layout="in_out")
    with pytest.raises(ValueError, match="weight must have 2 dimensions"):
        f(x, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="weight must have dtype float32 like the input"):
        f(x, w.astype(np.float64))
    with pytest.raises(ValueError, match=r"bias must have shape \[3\]"):
        f(x, w, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="bias must have dtype float32"):
        f(x, w, np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="activation must be one of"):
        f(x, w, activation="softplus")
    with pytest.raises(ValueError, match="weight_layout must be"):
        f(x, w, weight_layout="nk")
    with pytest.raises(ValueError, match="out must be"):
        f(x, w, out=np.zeros((2, 4), np.float32))
    if backend == "cuda":
        with pytest.raises(TypeError, match="x must have dtype float32"):
            f(x.astype(np.float64), w.astype(np.float64))
