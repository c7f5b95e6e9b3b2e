"""embedding (+ scale + positions) and sinusoidal_positions: references against PyTorch and
Hugging Face's Marian module, every backend against the reference."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

from seqjit import kernels
from seqjit.kernels.embedding import reference as ref


def _data(ids_shape, vocab, dim, dtype, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, ids_shape)
    table = rng.standard_normal((vocab, dim)).astype(dtype)
    positions = rng.standard_normal((ids_shape[-1] if ids_shape else 1, dim)).astype(dtype)
    return ids, table, positions


def _interleaved_torch(length, dim, offset):
    """The Annotated Transformer's table (exp/log form, float64), odd dim allowed."""
    pos = torch.arange(offset, offset + length, dtype=torch.float64)[:, None]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * -(math.log(10000.0) / dim))
    pe = torch.zeros(length, dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div[: dim // 2])
    return pe.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_reference_matches_torch(dtype):
    ids, table, positions = _data((3, 7), 50, 19, dtype)
    want = F.embedding(torch.from_numpy(ids), torch.from_numpy(table)).numpy()
    np.testing.assert_array_equal(ref.embedding(ids, table), want)
    want = (F.embedding(torch.from_numpy(ids), torch.from_numpy(table).double()) * 4.5 + torch.from_numpy(positions).double()).numpy()
    np.testing.assert_allclose(ref.embedding(ids, table, scale=4.5, positions=positions), want.astype(dtype), rtol=1e-7 if dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("dim", [1, 2, 7, 16, 512])
def test_halves_matches_marian(dim):
    module = MarianSinusoidalPositionalEmbedding(64, dim)
    table = module.create_weight()
    np.testing.assert_allclose(ref.sinusoidal_positions(64, dim, layout="halves"), table.numpy(), rtol=0, atol=1e-7)
    with torch.no_grad():
        module.weight.copy_(table)
        rows = module(torch.Size([2, 5]), cache_length=9).numpy()  # positions 9..13
    np.testing.assert_allclose(ref.sinusoidal_positions(5, dim, layout="halves", offset=9), rows, rtol=0, atol=1e-7)


@pytest.mark.parametrize("dim", [1, 2, 7, 16, 512])
def test_interleaved_matches_torch_formula(dim):
    got = ref.sinusoidal_positions(100, dim, offset=3, dtype=np.float64)
    np.testing.assert_allclose(got, _interleaved_torch(100, dim, 3), rtol=0, atol=1e-11)


@pytest.mark.parametrize("positions", [False, True])
@pytest.mark.parametrize("ids_shape, dim", [((), 5), ((1,), 1), ((5,), 19), ((3, 7), 130), ((2, 3, 4), 33), ((400, 100), 64)])
def test_embedding_backend_matches_reference(backend, ids_shape, dim, positions, tol, on_simulator):
    if backend == "cuda" and on_simulator and math.prod(ids_shape) * dim > 1000:
        ids_shape, dim = (2, 3), 130  # the simulator runs each GPU thread as a Python thread
    if positions and not ids_shape:
        return  # positions need an ids axis (checked in test_bad_input)
    f = kernels.get("embedding", backend=backend)
    for dtype in [np.float32] if backend == "cuda" else [np.float32, np.float64]:
        ids, table, pos = _data(ids_shape, 57, dim, dtype, seed=len(ids_shape))
        pos = pos if positions else None
        want = ref.embedding(ids, table, scale=2.5, positions=pos)
        got = f(ids.astype(np.int32), table, scale=2.5, positions=pos)
        assert got.shape == ids_shape + (dim,) and got.dtype == dtype
        np.testing.assert_allclose(got, want, **tol(dtype))
        out = np.empty(ids_shape + (dim,), dtype)
        assert f(ids, table, positions=pos, out=out) is out
        np.testing.assert_allclose(out, ref.embedding(ids, table, positions=pos), **tol(dtype))


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
@pytest.mark.parametrize("length, dim, offset", [(0, 4, 0), (1, 1, 0), (5, 7, 3), (9, 16, 0), (70, 130, 1000)])
def test_positions_backend_matches_reference(backend, layout, length, dim, offset, tol, on_simulator):
    if backend == "cuda" and on_simulator and length * dim > 200:
        length, dim = 6, 33
    f = kernels.get("sinusoidal_positions", backend=backend)
    for dtype in [np.float32] if backend == "cuda" else [np.float32, np.float64]:
        got = f(length, dim, layout=layout, offset=offset, dtype=dtype)
        assert got.shape == (length, dim) and got.dtype == dtype
        np.testing.assert_allclose(got, ref.sinusoidal_positions(length, dim, layout=layout, offset=offset, dtype=dtype), **tol(dtype))


def test_cuda_device_ids_and_table():
    if "cuda" not in kernels.backends("embedding"):
        pytest.skip("no GPU and no CUDA simulator")
    from seqjit.kernels._cuda import is_device_array, to_device

    ids, table, pos = _data((2, 3), 11, 5, np.float32)
    y = kernels.get("embedding", backend="cuda")(to_device(ids), to_device(table), positions=pos)
    assert is_device_array(y)
    np.testing.assert_allclose(y.copy_to_host(), ref.embedding(ids, table, positions=pos), rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 11\).*got 11"):
        kernels.get("embedding", backend="cuda")(to_device(np.full((2, 3), 11)), to_device(table))


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(0, 4),
    length=st.integers(1, 20),
    dim=st.integers(1, 70),
    scale=st.floats(-10, 10),
    with_positions=st.booleans(),
    offset=st.integers(0, 5000),
    seed=st.integers(0, 2**31),
)
def test_numba_and_cython_match_reference_property(batch, length, dim, scale, with_positions, offset, seed):
    ids, table, pos = _data((batch, length), 31, dim, np.float32, seed)
    pos = pos if with_positions else None
    want = ref.embedding(ids, table, scale=scale, positions=pos)
    table_want = ref.sinusoidal_positions(length, dim, layout="halves", offset=offset)
    for backend in ("numba", "cython"):
        np.testing.assert_allclose(kernels.get("embedding", backend=backend)(ids, table, scale=scale, positions=pos), want, rtol=2e-5, atol=2e-6)
        got = kernels.get("sinusoidal_positions", backend=backend)(length, dim, layout="halves", offset=offset)
        np.testing.assert_allclose(got, table_want, rtol=2e-5, atol=2e-6)


def test_bad_input_is_named(backend):
    f = kernels.get("embedding", backend=backend)
    table = np.zeros((10, 4), np.float32)
    ids = np.array([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\).*got 10"):
        f(np.array([1, 10]), table)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\).*got -1"):
        f(np.array([-1, 3]), table)
    with pytest.raises(TypeError, match="ids must hold integers"):
        f(np.array([1.0, 2.0]), table)
    with pytest.raises(TypeError, match="table must have dtype"):
        f(ids, table.astype(np.int32))
    with pytest.raises(ValueError, match="table must have 2 dimensions"):
        f(ids, np.zeros(10, np.float32))
    with pytest.raises(ValueError, match=r"positions must have shape \[3, 4\]"):
        f(ids, table, positions=np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="positions must have dtype float32 like the input"):
        f(ids, table, positions=np.zeros((3, 4), np.float64))
    with pytest.raises(ValueError, match="positions needs ids with at least 1 dimension"):
        f(np.array(3), table, positions=np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="scale must be a finite real number"):
        f(ids, table, scale=float("nan"))
    with pytest.raises(ValueError, match="out must be"):
        f(ids, table, out=np.zeros((3, 4), np.float32))
    g = kernels.get("sinusoidal_positions", backend=backend)
    with pytest.raises(ValueError, match="length must be >= 0"):
        g(-1, 4)
    with pytest.raises(ValueError, match="dim must be >= 1"):
        g(3, 0)
    with pytest.raises(TypeError, match="offset must be an integer"):
        g(3, 4, offset=1.5)
    with pytest.raises(ValueError, match="layout must be 'interleaved' or 'halves'"):
        g(3, 4, layout="marian")
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        g(3, 4, dtype=np.int32)
    if backend == "cuda":
        with pytest.raises(TypeError, match="table must have dtype float32"):
            f(ids, table.astype(np.float64))
