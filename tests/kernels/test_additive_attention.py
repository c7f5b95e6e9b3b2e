"""additive_attention (Bahdanau): the reference against a direct torch formula, every backend against the reference."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjit import kernels
from seqjit.kernels.additive_attention import reference as ref
from seqjit.kernels.rnn import _driver


def _torch_attention(query, keys_proj, keys, w_q, v, lengths):
    """The formula written directly in torch: e = v . tanh(W_q s + U h), masked softmax, weighted sum."""
    q, kp, k, w, vv = (torch.from_numpy(a) for a in (query, keys_proj, keys, w_q, v))
    scores = torch.tanh((q @ w.T)[:, None, :] + kp) @ vv  # [B, L]
    L = kp.shape[1]
    keep = torch.arange(L)[None, :] < torch.as_tensor(lengths)[:, None]
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)  # all-masked rows: softmax of all -inf is NaN -> 0
    return torch.einsum("bl,bld->bd", weights, k).numpy(), weights.numpy()


def _case(B, L, A, Dq, Dk, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    arrays = (
        rng.standard_normal((B, Dq)),
        rng.standard_normal((B, L, A)),
        rng.standard_normal((B, L, Dk)),
        rng.standard_normal((A, Dq)) / np.sqrt(max(Dq, 1)),
        rng.standard_normal(A),
    )
    lengths = rng.integers(0, L + 1, size=B)
    if B:
        lengths[0] = L
    return [a.astype(dtype) for a in arrays], lengths


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reference_matches_torch(dtype):
    args, lengths = _case(5, 9, 16, 7, 6, dtype)
    lengths[1] = 0
    want = _torch_attention(*args, lengths)
    got = ref.additive_attention(*args, lengths=lengths)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[0][1], 0)
    np.testing.assert_array_equal(got[1][1], 0)
    full = _torch_attention(*args, np.full(5, 9))
    for g, w in zip(ref.additive_attention(*args), full):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# B, L, A, Dq, Dk: batch 1, odd sizes, sizes around SIMD widths and the 128-thread blocks
CPU_SHAPES = [(1, 1, 1, 1, 1), (1, 50, 256, 64, 48), (3, 7, 17, 5, 9), (16, 33, 31, 16, 130), (4, 130, 8, 3, 2)]
SIM_SHAPES = [(1, 1, 1, 1, 1), (3, 7, 17, 5, 9), (2, 130, 3, 2, 130)]


def test_backend_matches_reference(backend, tol, on_simulator, monkeypatch):
    f = kernels.get("additive_attention", backend=backend)
    shapes = SIM_SHAPES if backend == "cuda" and on_simulator else CPU_SHAPES
    dtypes = [np.float32] if backend == "cuda" else [np.float32, np.float64]
    # CPU calls under _driver.PARALLEL_MIN_MACS run on one thread: also force the parallel path
    for threshold in [_driver.PARALLEL_MIN_MACS] + ([0] if backend != "cuda" else []):
        monkeypatch.setattr(_driver, "PARALLEL_MIN_MACS", threshold)
        for i, shape in enumerate(shapes):
            for dtype in dtypes:
                args, lengths = _case(*shape, dtype=dtype, seed=i)
                for ln in (None, lengths):
                    for g, w in zip(f(*args, lengths=ln), ref.additive_attention(*args, lengths=ln)):
                        np.testing.assert_allclose(g, w, **tol(dtype))


def test_zero_length_rows_give_zeros(backend):
    args, _ = _case(3, 5, 4, 3, 2)
    context, weights = kernels.get("additive_attention", backend=backend)(*args, lengths=[0, 2, 0])
    assert not np.isnan(context).any() and not np.isnan(weights).any()
    np.testing.assert_array_equal(context[[0, 2]], 0)
    np.testing.assert_array_equal(weights[[0, 2]], 0)
    np.testing.assert_array_equal(weights[1, 2:], 0)
    np.testing.assert_allclose(weights[1].sum(), 1, rtol=1e-6)


def test_empty_source_and_empty_batch(backend):
    f = kernels.get("additive_attention", backend=backend)
    args, _ = _case(2, 0, 4, 3, 5)
    context, weights = f(*args)
    assert weights.shape == (2, 0)
    np.testing.assert_array_equal(context, np.zeros((2, 5), np.float32))
    args, _ = _case(0, 3, 4, 3, 5)
    context, weights = f(*args)
    assert context.shape == (0, 5) and weights.shape == (0, 3)


@pytest.mark.parametrize("backend", ["cuda"], indirect=True)
def test_cuda_device_arrays_stay_on_device(backend, tol):
    from numba import cuda

    args, lengths = _case(2, 5, 4, 3, 2)
    out = kernels.get("additive_attention", backend="cuda")(*(cuda.to_device(a) for a in args), lengths=lengths)
    assert not any(isinstance(o, np.ndarray) for o in out)
    for g, w in zip(out, ref.additive_attention(*args, lengths=lengths)):
        np.testing.assert_allclose(g.copy_to_host(), w, **tol(np.float32))


@settings(max_examples=30, deadline=None)
@given(B=st.integers(1, 5), L=st.integers(1, 40), A=st.integers(1, 40), Dq=st.integers(1, 20),
       Dk=st.integers(1, 20), seed=st.integers(0, 2**31), masked=st.booleans())
def test_numba_and_cython_match_reference_property(B, L, A, Dq, Dk, seed, masked):
    args, lengths = _case(B, L, A, Dq, Dk, seed=seed)
    ln = lengths if masked else None
    want = ref.additive_attention(*args, lengths=ln)
    for backend in ("numba", "cython"):
        for g, w in zip(kernels.get("additive_attention", backend=backend)(*args, lengths=ln), want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def test_bad_input_is_named(backend):
    f = kernels.get("additive_attention", backend=backend)
    (q, kp, k, w, v), _ = _case(2, 5, 4, 3, 6)
    with pytest.raises(ValueError, match="query must have 2 dimensions"):
        f(q[0], kp, k, w, v)
    with pytest.raises(TypeError, match="query must have dtype"):
        f(q.astype(np.int64), kp, k, w, v)
    with pytest.raises(ValueError, match="keys_proj must have 3 dimensions"):
        f(q, kp[0], k, w, v)
    with pytest.raises(ValueError, match=r"keys_proj must have shape \[2, \*, \*\]"):
        f(q, kp[:1], k, w, v)
    with pytest.raises(ValueError, match=r"keys must have shape \[2, 5, \*\]"):
        f(q, kp, k[:, :4], w, v)
    with pytest.raises(ValueError, match=r"w_q must have shape \[4, 3\]"):
        f(q, kp, k, w[:, :2], v)
    with pytest.raises(ValueError, match=r"v must have shape \[4\]"):
        f(q, kp, k, w, v[:3])
    with pytest.raises(TypeError, match="keys must have dtype float32 like the input"):
        f(q, kp, k.astype(np.float64), w, v)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 5\]"):
        f(q, kp, k, w, v, lengths=[6, 1])
    with pytest.raises(ValueError, match=r"lengths must have shape \[2\]"):
        f(q, kp, k, w, v, lengths=[1])
    with pytest.raises(TypeError, match="lengths must hold integers"):
        f(q, kp, k, w, v, lengths=[1.5, 1.0])


def test_registry_lists_additive_attention_backends():
    assert {"reference", "numba", "cython"} <= set(kernels.backends("additive_attention"))
