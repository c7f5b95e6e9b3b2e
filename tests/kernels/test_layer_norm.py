"""layer_norm: the reference against PyTorch, every backend against the reference."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjit import kernels
from seqjit.kernels.layer_norm import reference as ref

AFFINE = [(True, True), (False, False), (True, False), (False, True)]


def _data(shape, dtype, seed=0, offset=2.0, spread=3.0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * spread + offset).astype(dtype)
    d = shape[-1]
    w = rng.standard_normal(d).astype(dtype)
    b = rng.standard_normal(d).astype(dtype)
    return x, w, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", AFFINE)
def test_reference_matches_torch(dtype, affine):
    x, w, b = _data((3, 5, 37), dtype)
    w = w if affine[0] else None
    b = b if affine[1] else None
    t = lambda a: None if a is None else torch.from_numpy(a)  # noqa: E731
    want = F.layer_norm(t(x), (37,), t(w), t(b), eps=1e-5).numpy()
    rtol, atol = (1e-5, 2e-6) if dtype == np.float32 else (1e-12, 1e-13)
    np.testing.assert_allclose(ref.layer_norm(x, w, b, eps=1e-5), want, rtol=rtol, atol=atol)
    module = torch.nn.LayerNorm(37, eps=1e-3, elementwise_affine=False).to(torch.float64)
    np.testing.assert_allclose(ref.layer_norm(x.astype(np.float64), eps=1e-3), module(t(x.astype(np.float64))).detach().numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 7), (5, 128), (3, 129), (2, 3, 257), (600, 64)])
def test_backend_matches_reference(backend, affine, shape, tol, on_simulator):
    if backend == "cuda" and on_simulator:
        # the simulator runs each GPU thread as a Python thread (one 128-thread block per row):
        # every affine variant on one row, the tile-crossing shapes with weight and bias only
        if affine != (True, True):
            shape = (1, 7)
        elif np.prod(shape) > 800:
            shape = (2, 129)
    f = kernels.get("layer_norm", backend=backend)
    for dtype in [np.float32] if backend == "cuda" else [np.float32, np.float64]:
        x, w, b = _data(shape, dtype, seed=len(shape))
        w = w if affine[0] else None
        b = b if affine[1] else None
        want = ref.layer_norm(x, w, b, eps=1e-5)
        np.testing.assert_allclose(f(x, w, b), want, **tol(dtype))
        out = np.empty_like(x)
        assert f(x, w, b, out=out) is out
        np.testing.assert_allclose(out, want, **tol(dtype))


def test_constant_rows_and_eps(backend):
    x = np.ones((3, 10), np.float32) * 7
    x[2] = np.arange(10)
    f = kernels.get("layer_norm", backend=backend)
    for eps in (1e-5, 0.5) if backend != "cuda" else (0.5,):
        np.testing.assert_allclose(f(x, eps=eps), ref.layer_norm(x, eps=eps), rtol=2e-5, atol=2e-6)
    assert not np.isnan(f(x)).any()


def test_cuda_device_arrays_stay_on_device():
    if "cuda" not in kernels.backends("layer_norm"):
        pytest.skip("no GPU and no CUDA simulator")
    from seqjit.kernels._cuda import is_device_array, to_device

    x, w, b = _data((3, 20), np.float32)
    y = kernels.get("layer_norm", backend="cuda")(to_device(x), to_device(w), b)
    assert is_device_array(y)
    np.testing.assert_allclose(y.copy_to_host(), ref.layer_norm(x, w, b), rtol=2e-5, atol=2e-6)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(0, 8),
    d=st.integers(1, 300),
    offset=st.floats(-50, 50),
    spread=st.floats(0.01, 30),
    affine=st.sampled_from(AFFINE),
    seed=st.integers(0, 2**31),
)
def test_numba_and_cython_match_reference_property(rows, d, offset, spread, affine, seed):
    x, w, b = _data((rows, d), np.float32, seed, offset, spread)
    w = w if affine[0] else None
    b = b if affine[1] else None
    want = ref.layer_norm(x, w, b)
    for backend in ("numba", "cython"):
        np.testing.assert_allclose(kernels.get("layer_norm", backend=backend)(x, w, b), want, rtol=2e-5, atol=4e-6)


def test_bad_input_is_named(backend):
    f = kernels.get("layer_norm", backend=backend)
    x = np.zeros((2, 4), np.float32)
    w = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="x must have dtype"):
        f(np.zeros((2, 4), np.int64))
    with pytest.raises(TypeError, match="x must be a numpy.ndarray"):
        f([[1.0, 2.0]])
    with pytest.raises(ValueError, match="x must have at least 1 dimension"):
        f(np.ones((), np.float32))
    with pytest.raises(ValueError, match=r"weight must have shape \[4\]"):
        f(x, np.ones(5, np.float32))
    with pytest.raises(ValueError, match="weight must have 1 dimensions"):
        f(x, np.ones((1, 4), np.float32))
    with pytest.raises(ValueError, match=r"bias must have shape \[4\]"):
        f(x, w, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="bias must have dtype float32 like the input"):
        f(x, w, np.ones(4, np.float64))
    with pytest.raises(ValueError, match="eps must be a positive finite number"):
        f(x, w, eps=-1.0)
    with pytest.raises(ValueError, match="out must be"):
        f(x, out=np.zeros((4, 2), np.float32))
    if backend == "cuda":
        with pytest.raises(TypeError, match="x must have dtype float32"):
            f(np.zeros((2, 4), np.float64))
