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


INF, NAN = np.inf, np.nan
#: rows that are not ordinary finite numbers (rules in kernels/softmax/spec.py)
SPECIAL_ROWS = [
    [1, NAN, 2, 0],          # a NaN: all NaN (torch too)
    [NAN, NAN, NAN, NAN],
    [-INF, NAN, -INF, -INF],  # a NaN among -inf: NaN, not the empty-row zeros
    [1, INF, 2, INF],        # +inf: all NaN (torch too)
    [INF, -INF, 0, 1],
    [INF, NAN, 0, 0],
    [1, -INF, 2, 3],         # a -inf element: an ordinary row
    [-3e38, 3e38, 0, 1],     # finite extremes: an ordinary row
]


@pytest.mark.filterwarnings("error::RuntimeWarning")  # the reference warns about nothing: these rows are its spec
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reference_matches_torch_on_nan_and_inf_rows(op, dtype):
    x = np.array(SPECIAL_ROWS, dtype)
    got = getattr(ref, op)(x)
    np.testing.assert_allclose(got, getattr(torch, op)(torch.from_numpy(x), dim=-1).numpy(), rtol=1e-6)
    assert np.isnan(got[:6]).all() and not np.isnan(got[6:]).any()
    # the one deliberate difference: an all -inf row gives zeros / -inf (torch: NaN), as a fully masked row
    row = np.full((1, 4), -INF, dtype)
    assert np.isnan(getattr(torch, op)(torch.from_numpy(row), dim=-1).numpy()).all()
    np.testing.assert_array_equal(getattr(ref, op)(row), np.full((1, 4), -INF if op == "log_softmax" else 0, dtype))


@pytest.mark.parametrize("op", OPS)
def test_reference_ignores_removed_nan_and_inf(op):
    """A masked-out NaN or +inf does not matter: the row equals the row without it."""
    x = np.array([[1, NAN, 2, 0], [INF, 1, 2, 0], [1, 2, 0, -INF]], np.float32)
    mask = np.array([[True, False, True, True], [False, True, True, True], [True, True, True, False]])
    fill = -INF if op == "log_softmax" else 0
    want = np.full(x.shape, fill, np.float32)
    for r in range(3):
        want[r, mask[r]] = getattr(torch, op)(torch.from_numpy(x[r, mask[r]]), dim=-1).numpy()
    np.testing.assert_allclose(getattr(ref, op)(x, mask), want, rtol=1e-6)
    # a kept NaN makes the whole row NaN, removed elements included
    assert np.isnan(getattr(ref, op)(x, ~mask)[:2]).all()


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the CUDA simulator: 3e38 - -3e38
@pytest.mark.parametrize("op", OPS)
def test_backend_follows_reference_on_nan_and_inf(backend, op, on_simulator):
    f, want = kernels.get(op, backend=backend), getattr(ref, op)
    dtypes = [np.float32] if backend == "cuda" else [np.float32, np.float64]
    x = np.array(SPECIAL_ROWS, np.float64)
    mask = np.random.default_rng(2).random(x.shape) > 0.3
    mask[:, 1] = False  # the NaN / +inf in column 1 removed: rows 0, 1, 3 become ordinary (or empty)
    widths = (37,) if on_simulator else (37, 130, 1000)  # NaN / inf in the vectorised body and the tail
    for dtype in dtypes:
        xd = x.astype(dtype)
        np.testing.assert_allclose(f(xd), want(xd), rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(f(xd, mask), want(xd, mask), rtol=2e-5, atol=1e-6)
        for n in widths:
            for pos in (0, 9, n - 1):
                for value in (NAN, INF, -INF):
                    y = np.random.default_rng(n + pos).standard_normal((2, n)).astype(dtype)
                    y[1, pos] = value
                    keep = np.ones(y.shape, bool)
                    keep[0, pos] = False
                    y[0, pos] = value  # removed: row 0 stays ordinary
                    np.testing.assert_allclose(f(y, keep), want(y, keep), rtol=2e-5, atol=1e-6)
                    np.testing.assert_allclose(f(y), want(y), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(3, 0), (0, 5), (0,), (2, 0, 4)])
def test_empty_shapes_give_empty_results(backend, op, shape):
    x = np.zeros(shape, np.float32)
    for f in (getattr(ref, op), kernels.get(op, backend=backend)):
        y = f(x)
        assert y.shape == shape and y.dtype == np.float32
        assert f(x, np.ones(shape, bool)).shape == shape


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
