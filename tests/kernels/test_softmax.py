"""softmax / log_softmax: the reference against PyTorch, every backend against the reference."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjit import kernels
from seqjit.kernels.softmax import reference as ref

OPS = ["softmax", "log_softmax"]


def _masked_torch(op, x, mask):
    t = torch.from_numpy(x).masked_fill(torch.from_numpy(~mask), float("-inf"))
    y = getattr(torch, op)(t, dim=-1)
    empty = ~torch.from_numpy(mask).any(dim=-1, keepdim=True)
    fill = float("-inf") if op == "log_softmax" else 0.0
    return y.masked_fill(empty, fill).masked_fill(torch.from_numpy(~mask), fill).numpy()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reference_matches_torch(op, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 5, 37)) * 10).astype(dtype)
    np.testing.assert_allclose(getattr(ref, op)(x), getattr(torch, op)(torch.from_numpy(x), dim=-1).numpy(), rtol=1e-5, atol=1e-6)
    mask = rng.random(x.shape) > 0.4
    mask[0, 0] = False  # a fully masked row
    np.testing.assert_allclose(getattr(ref, op)(x, mask), _masked_torch(op, x, mask), rtol=1e-5, atol=1e-6)
    assert not np.isnan(getattr(ref, op)(x, mask)).any()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(1,), (1, 1), (4, 7), (2, 3, 129), (5, 1000)])
def test_backend_matches_reference(backend, op, shape, tol, on_simulator):
    if backend == "cuda" and on_simulator and np.prod(shape) > 200:
        shape = (2, 133)  # the simulator runs each GPU thread as a Python thread
    rng = np.random.default_rng(1)
    dtypes = [np.float32] if backend == "cuda" else [np.float32, np.float64]
    for dtype in dtypes:
        x = (rng.standard_normal(shape) * 5).astype(dtype)
        mask = rng.random(shape) > 0.3
        if x.ndim > 1:
            mask[0] = False
        f = kernels.get(op, backend=backend)
        np.testing.assert_allclose(f(x), getattr(ref, op)(x), **tol(dtype))
        np.testing.assert_allclose(f(x, mask), getattr(ref, op)(x, mask), **tol(dtype))
        out = np.empty_like(x)
        assert f(x, mask, out=out) is out
        np.testing.assert_allclose(out, getattr(ref, op)(x, mask), **tol(dtype))


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 6), n=st.integers(1, 300), seed=st.integers(0, 2**31), masked=st.booleans())
def test_numba_and_cython_match_reference_property(rows, n, seed, masked):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, n)) * 20).astype(np.float32)
    mask = rng.random((rows, n)) > 0.5 if masked else None
    # log_softmax subtracts numbers of |x|'s size: float32 rounding there is ~eps * max|x|
    atol = 4 * np.finfo(np.float32).eps * max(1.0, float(np.abs(x).max()))
    for op in OPS:
        want = getattr(ref, op)(x, mask)
        for backend in ("numba", "cython"):
            np.testing.assert_allclose(kernels.get(op, backend=backend)(x, mask), want, rtol=2e-5, atol=atol)


def test_all_masked_and_all_neg_inf_rows_give_no_nan(backend):
    x = np.full((2, 4), -np.inf, dtype=np.float32)
    x[1] = [1.0, -np.inf, 2.0, 3.0]
    mask = np.array([[True] * 4, [False] * 4])
    for op in OPS:
        y = kernels.get(op, backend=backend)(x, mask)
        assert not np.isnan(y).any()
    np.testing.assert_array_equal(kernels.get("softmax", backend=backend)(x, mask), np.zeros((2, 4), np.float32))


@pytest.mark.parametrize("op", OPS)
def test_bad_input_is_named(backend, op):
    f = kernels.get(op, backend=backend)
    with pytest.raises(TypeError, match="x must have dtype"):
        f(np.zeros((2, 3), dtype=np.int32))
    with pytest.raises(TypeError, match="x must be a numpy.ndarray"):
        f([[1.0, 2.0]])
    with pytest.raises(ValueError, match="mask must be broadcastable"):
        f(np.zeros((2, 3), np.float32), np.ones((2, 4), bool))
    with pytest.raises(TypeError, match="mask must have dtype bool"):
        f(np.zeros((2, 3), np.float32), np.ones((2, 3), np.int8))
    with pytest.raises(ValueError, match="out must be"):
        f(np.zeros((2, 3), np.float32), out=np.zeros((3, 2), np.float32))


def test_registry_lists_and_rejects():
    assert {"reference", "numba", "cython"} <= set(kernels.backends("softmax"))
    assert kernels.get("softmax") is not None
    with pytest.raises(ValueError, match="unknown kernel"):
        kernels.get("no_such_op")
    with pytest.raises(ValueError, match="unknown backend"):
        kernels.get("softmax", backend="tpu")
