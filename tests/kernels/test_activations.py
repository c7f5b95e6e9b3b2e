"""relu / gelu / silu / tanh: the reference against PyTorch, every backend against the reference,
and the vectorisable float32 math of kernels/_vecmath.py against float64 libm."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from seqjit import kernels
from seqjit.kernels import _vecmath
from seqjit.kernels.activations import reference as ref

# (op name, kwargs, torch function)
CASES = [
    ("relu", {}, F.relu),
    ("gelu", {}, F.gelu),
    ("gelu", {"approximate": "tanh"}, lambda t: F.gelu(t, approximate="tanh")),
    ("silu", {}, F.silu),
    ("tanh", {}, torch.tanh),
]
IDS = ["relu", "gelu", "gelu_tanh", "silu", "tanh"]


def _inputs(shape, dtype, seed=0, spread=4.0):
    x = np.asarray(np.random.default_rng(seed).standard_normal(shape) * spread, dtype=dtype)
    flat = x.reshape(-1)
    extremes = np.array([0.0, -0.0, 1e-7, -1e-7, 0.5, -0.5, 30.0, -30.0, 100.0, -100.0], dtype)
    flat[: min(flat.size, extremes.size)] = extremes[: flat.size]
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reference_matches_torch(case, dtype):
    op, kwargs, torch_fn = case
    x = _inputs((3, 5, 41), dtype)
    want = torch_fn(torch.from_numpy(x)).numpy()
    got = getattr(ref, op)(x, **kwargs)
    if dtype == np.float64:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    else:
        # PyTorch's vectorised float32 gelu/silu/tanh approximate (its erf has absolute error up to
        # ~1.5e-7, i.e. up to 0.5 * |x| * 1.5e-7 in gelu); the reference is exact to float32 rounding.
        err = np.abs(got.astype(np.float64) - want)
        assert np.all(err <= 1e-6 * np.abs(want) + 2e-7 * (1 + np.abs(x))), err.max()


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 129), (70001,)])
def test_backend_matches_reference(backend, case, shape, tol, on_simulator):
    op, kwargs, _ = case
    if backend == "cuda" and on_simulator and np.prod(shape) > 600:
        shape = (2, 300)  # the simulator runs each GPU thread as a Python thread
    f = kernels.get(op, backend=backend)
    for dtype in [np.float32] if backend == "cuda" else [np.float32, np.float64]:
        x = _inputs(shape, dtype, seed=len(shape))
        want = getattr(ref, op)(x, **kwargs)
        got = f(x, **kwargs)
        assert got.shape == x.shape and got.dtype == x.dtype
        np.testing.assert_allclose(got, want, **tol(dtype))
        out = np.empty_like(x)
        assert f(x, **kwargs, out=out) is out
        np.testing.assert_allclose(out, want, **tol(dtype))
        inplace = x.copy()
        assert f(inplace, **kwargs, out=inplace) is inplace
        np.testing.assert_allclose(inplace, want, **tol(dtype))


def test_cuda_device_arrays_stay_on_device(on_simulator):
    if kernels.backends("gelu").count("cuda") == 0:
        pytest.skip("no GPU and no CUDA simulator")
    from seqjit.kernels._cuda import is_device_array, to_device

    x = _inputs((4, 9), np.float32)
    y = kernels.get("gelu", backend="cuda")(to_device(x))
    assert is_device_array(y)
    np.testing.assert_allclose(y.copy_to_host(), ref.gelu(x), rtol=2e-5, atol=2e-6)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 3000), spread=st.floats(0.01, 40), seed=st.integers(0, 2**31))
def test_numba_and_cython_match_reference_property(n, spread, seed):
    x = (np.random.default_rng(seed).standard_normal(n) * spread).astype(np.float32)
    for op, kwargs, _ in CASES:
        want = getattr(ref, op)(x, **kwargs)
        for backend in ("numba", "cython"):
            np.testing.assert_allclose(kernels.get(op, backend=backend)(x, **kwargs), want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("op", ["relu", "gelu", "silu", "tanh"])
def test_bad_input_is_named(backend, op):
    f = kernels.get(op, backend=backend)
    with pytest.raises(TypeError, match="x must have dtype"):
        f(np.zeros(3, np.int32))
    with pytest.raises(TypeError, match="x must be a numpy.ndarray"):
        f([1.0, 2.0])
    with pytest.raises(ValueError, match="out must be"):
        f(np.zeros((2, 3), np.float32), out=np.zeros((3, 2), np.float32))
    with pytest.raises((TypeError, ValueError), match="out must be"):
        f(np.zeros((2, 3), np.float32), out=np.zeros((2, 3), np.float64))
    if op == "gelu":
        with pytest.raises(ValueError, match="approximate must be"):
            f(np.zeros(3, np.float32), approximate="erf")
    if backend == "cuda":
        with pytest.raises(TypeError, match="x must have dtype float32"):
            f(np.zeros(3, np.float64))


# ---- the float32 polynomials every Numba kernel uses (kernels/_vecmath.py) -----------------------


@njit(error_model="numpy")
def _map(fn_code, x, out):
    for i in range(x.shape[0]):
        if fn_code == 0:
            out[i] = _vecmath.exp_f32(x[i])
        elif fn_code == 1:
            out[i] = _vecmath.tanh_f32(x[i])
        elif fn_code == 2:
            out[i] = _vecmath.erf_f32(x[i])
        else:
            out[i] = _vecmath.sigmoid_f32(x[i])


@pytest.mark.parametrize(
    "code, fn, rel, absol",
    [
        (0, np.exp, 3e-7, 0.0),  # ~2 ulp
        (1, np.tanh, 3e-7, 0.0),
        (2, None, 2e-7, 1.5e-7),  # A&S 7.1.26 for |x| >= 1: absolute error < 1.5e-7
        (3, lambda v: 1 / (1 + np.exp(-v)), 3e-7, 0.0),
    ],
    ids=["exp", "tanh", "erf", "sigmoid"],
)
def test_vecmath_against_float64_libm(code, fn, rel, absol):
    from scipy import special

    fn = special.erf if fn is None else fn
    x = np.concatenate([np.linspace(-87.3, 88.3, 200001), np.linspace(-1e-3, 1e-3, 2001)]).astype(np.float32)
    got = np.empty_like(x)
    _map(code, x, got)
    want = fn(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=rel, atol=absol + 1e-37)
    special_x = np.array([-np.inf, -200, -87.5, 0.0, 89.0, np.inf, np.nan], np.float32)
    got = np.empty_like(special_x)
    _map(code, special_x, got)
    with np.errstate(over="ignore"):
        want = fn(special_x.astype(np.float64)).astype(np.float32)
    for a in (got, want):  # documented: exp flushes denormal results to 0
        a[np.abs(a) < np.finfo(np.float32).tiny] = 0
    np.testing.assert_array_equal(got, want)  # exact limits: 0 / inf / +-1, NaN stays NaN
