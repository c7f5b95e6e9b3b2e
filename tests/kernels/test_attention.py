"""attention: the reference against PyTorch SDPA, every backend against the reference.

CPU tiles are ``tile_sizes(Lq, Lk, D, Dv)`` (kernels/attention/_blas.py): 64 queries x
2**19 // (64 * max(D, Dv)) keys (512 at D = 16, 128 at D = 64; more keys when fewer queries, up to
8192). The cuda kernels tile 32 queries x 16 keys, switch to one block per query row below 8
queries, and to the split-K decode kernel for one query (at most 256 keys a block, split into chunks
of at least 64 keys to fill the GPU). Shapes below straddle those sizes; on the CUDA simulator (one Python thread per GPU thread)
smaller shapes that still cross the cuda tiles are used.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjit import kernels
from seqjit.kernels.attention import cython_cpu, numba_cpu
from seqjit.kernels.attention import reference as ref
from seqjit.kernels.attention._blas import tile_sizes
from seqjit.kernels.attention._fastexp import exp2_nonpos

F32_EPS = float(np.finfo(np.float32).eps)


def _inputs(B, H, Lq, Lk, D, Dv, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, Lq, D)).astype(dtype)
    k = rng.standard_normal((B, H, Lk, D)).astype(dtype)
    v = rng.standard_normal((B, H, Lk, Dv)).astype(dtype)
    return q, k, v


def _keep(B, Lq, Lk, causal, lengths):
    """[B, 1, Lq, Lk] bool: the spec's rule written out independently (torch attn_mask, True = attend)."""
    i = np.arange(Lq)[:, None]
    j = np.arange(Lk)[None, :]
    keep = np.ones((B, 1, Lq, Lk), bool)
    if causal:
        keep &= (j <= i + (Lk - Lq))[None, None]
    if lengths is not None:
        keep &= (j[None, None] < np.asarray(lengths)[:, None, None, None])
    return keep


def _sdpa(q, k, v, keep=None, causal=False, scale=None):
    t = [torch.from_numpy(x) for x in (q, k, v)]
    mask = None if keep is None else torch.from_numpy(keep)
    return F.scaled_dot_product_attention(*t, attn_mask=mask, is_causal=causal, scale=scale).numpy()


# ------------------------------------------------------------------ reference vs PyTorch


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reference_matches_sdpa_plain_and_causal(dtype):
    q, k, v = _inputs(2, 3, 17, 17, 8, 8, dtype)
    np.testing.assert_allclose(ref.attention(q, k, v), _sdpa(q, k, v), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ref.attention(q, k, v, causal=True), _sdpa(q, k, v, causal=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("Lq, Lk", [(5, 23), (1, 40), (23, 23)])
def test_reference_causal_alignment_matches_sdpa_mask(Lq, Lk):
    """Lq <= Lk: every query sees at least one key, so SDPA with the explicit mask has no NaN rows."""
    q, k, v = _inputs(2, 2, Lq, Lk, 6, 6, np.float64)
    keep = _keep(2, Lq, Lk, True, None)
    np.testing.assert_allclose(ref.attention(q, k, v, causal=True), _sdpa(q, k, v, keep), rtol=1e-10, atol=1e-12)


def test_reference_lengths_scale_and_dv_match_sdpa():
    q, k, v = _inputs(3, 2, 9, 31, 8, 5, np.float64)  # Dv != D
    lengths = np.array([31, 1, 12])
    keep = _keep(3, 9, 31, False, lengths)
    got = ref.attention(q, k, v, lengths=lengths, scale=0.3)
    np.testing.assert_allclose(got, _sdpa(q, k, v, keep, scale=0.3), rtol=1e-10, atol=1e-12)
    keep = _keep(3, 9, 31, True, lengths)
    got = ref.attention(q, k, v, lengths=lengths, causal=True, scale=0.3)
    np.testing.assert_allclose(got, _sdpa(q, k, v, keep, scale=0.3), rtol=1e-10, atol=1e-12)


def test_reference_empty_rows_are_zero_where_sdpa_gives_nan():
    q, k, v = _inputs(2, 2, 12, 5, 4, 3, np.float64)  # causal with Lq > Lk: the first 7 queries see nothing
    lengths = np.array([5, 0])
    keep = _keep(2, 12, 5, True, lengths)
    want = _sdpa(q, k, v, keep)
    got, weights = ref.attention(q, k, v, causal=True, lengths=lengths, return_weights=True)
    seen = np.broadcast_to(keep.any(-1)[..., None], want.shape)
    np.testing.assert_allclose(got[seen], want[seen], rtol=1e-10, atol=1e-12)
    assert not np.isnan(got).any() and (got[~seen] == 0).all()
    assert (weights.sum(-1)[~seen[..., 0]] == 0).all()


def test_reference_weights_match_torch_softmax():
    q, k, v = _inputs(2, 2, 7, 11, 5, 4, np.float64)
    lengths = np.array([11, 6])
    keep = torch.from_numpy(_keep(2, 7, 11, True, lengths))
    scores = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / math.sqrt(5)
    want = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1).numpy()
    _, weights = ref.attention(q, k, v, causal=True, lengths=lengths, return_weights=True)
    np.testing.assert_allclose(weights, want, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------ every backend vs the reference

_BQ, _BK = tile_sizes(10**6, 10**6, 16, 16)  # the CPU tile at D = Dv = 16: 64 x 512

# name -> (CPU shape, CUDA-simulator shape), each (B, H, Lq, Lk, D, Dv)
CASES = {
    "ones": ((1, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 1)),
    "small_odd": ((2, 3, 5, 7, 8, 4), (2, 1, 9, 7, 3, 2)),
    "below_blocks": ((1, 2, _BQ - 1, _BK - 1, 16, 16), (1, 1, 31, 15, 4, 3)),
    "at_blocks": ((1, 1, _BQ, _BK, 16, 16), (1, 1, 32, 16, 3, 4)),
    "above_blocks": ((2, 1, _BQ + 1, _BK + 1, 16, 16), (1, 1, 33, 17, 3, 2)),
    "many_blocks": ((2, 2, 200, 300, 64, 48), (1, 2, 40, 37, 5, 3)),  # CPU: 4 x 3 tiles of 64 x 128
    "more_queries_than_keys": ((1, 2, 150, 40, 4, 4), (1, 1, 40, 10, 2, 2)),
    "decode": ((4, 2, 1, 1000, 32, 32), (3, 1, 1, 60, 4, 6)),  # cuda sim: one decode block per row
    "decode_long": ((2, 1, 1, 8200, 4, 4), (1, 1, 1, 300, 2, 2)),  # CPU: past one 8192-key decode tile; cuda: split
    "few_queries_long": ((2, 2, 2, 700, 32, 32), (1, 1, 2, 150, 3, 3)),  # cuda: row-wise, past its 128 keys
    "few_queries": ((2, 1, 20, 1000, 64, 64), (1, 1, 20, 40, 3, 3)),  # CPU: 409-key tiles
    "few_queries_big_head": ((2, 1, 3, 257, 160, 130), (1, 1, 3, 40, 130, 3)),
}


def _lengths_for(B, Lk, seed):
    """Per-row lengths including a zero and a full row when B allows."""
    lengths = np.random.default_rng(seed).integers(0, Lk + 1, B)
    lengths[0] = Lk
    if B > 1:
        lengths[1] = 0
    return lengths


@pytest.mark.parametrize("case", sorted(CASES))
def test_backend_matches_reference(backend, case, tol, on_simulator):
    cpu_shape, sim_shape = CASES[case]
    B, H, Lq, Lk, D, Dv = sim_shape if (backend == "cuda" and on_simulator) else cpu_shape
    f = kernels.get("attention", backend=backend)
    dtypes = [np.float32] if backend == "cuda" else [np.float32, np.float64]
    settings_ = [(False, None), (True, _lengths_for(B, Lk, 1))]
    if backend != "cuda" or not on_simulator:
        settings_ += [(True, None), (False, _lengths_for(B, Lk, 2))]
    for dtype in dtypes:
        q, k, v = _inputs(B, H, Lq, Lk, D, Dv, dtype, seed=3)
        for causal, lengths in settings_:
            want = ref.attention(q, k, v, causal=causal, lengths=lengths)
            got = f(q, k, v, causal=causal, lengths=lengths)
            np.testing.assert_allclose(got, want, **tol(dtype), err_msg=f"{dtype} causal={causal} lengths={lengths}")


@pytest.mark.parametrize("case", ["small_odd", "above_blocks", "decode"])
def test_backend_return_weights_and_out(backend, case, tol, on_simulator):
    cpu_shape, sim_shape = CASES[case]
    B, H, Lq, Lk, D, Dv = sim_shape if (backend == "cuda" and on_simulator) else cpu_shape
    f = kernels.get("attention", backend=backend)
    q, k, v = _inputs(B, H, Lq, Lk, D, Dv, seed=4)
    lengths = _lengths_for(B, Lk, 5)
    want, want_w = ref.attention(q, k, v, causal=True, lengths=lengths, return_weights=True, scale=0.7)
    out = np.empty((B, H, Lq, Dv), np.float32)
    got, got_w = f(q, k, v, causal=True, lengths=lengths, return_weights=True, scale=0.7, out=out)
    assert got is out
    np.testing.assert_allclose(got, want, **tol(np.float32))
    np.testing.assert_allclose(got_w, want_w, **tol(np.float32))
    out2 = np.empty_like(out)
    assert f(q, k, v, causal=True, lengths=lengths, scale=0.7, out=out2) is out2
    np.testing.assert_allclose(out2, want, **tol(np.float32))


def test_fully_masked_rows_and_zero_lengths_give_zeros(backend, on_simulator):
    Lq, Lk = (12, 5) if on_simulator and backend == "cuda" else (140, 70)
    f = kernels.get("attention", backend=backend)
    q, k, v = _inputs(2, 1, Lq, Lk, 4, 3, seed=6)
    out, w = f(q, k, v, causal=True, lengths=np.array([Lk, 0]), return_weights=True)
    assert not np.isnan(out).any() and not np.isnan(w).any()
    assert (out[1] == 0).all() and (w[1] == 0).all()  # length 0: nothing visible
    hidden = Lq - Lk  # causal with Lq > Lk: the first Lq - Lk queries of row 0 see no key
    assert (out[0, :, :hidden] == 0).all() and (w[0, :, :hidden] == 0).all()
    np.testing.assert_allclose(w[0, :, hidden:].sum(-1), 1, rtol=1e-5)


def test_empty_sizes(backend):
    f = kernels.get("attention", backend=backend)
    q, k, v = _inputs(2, 1, 3, 0, 4, 2)  # no keys at all
    out, w = f(q, k, v, return_weights=True)
    assert out.shape == (2, 1, 3, 2) and (out == 0).all() and w.shape == (2, 1, 3, 0)
    q, k, v = _inputs(1, 2, 0, 5, 4, 2)  # no queries
    assert f(q, k, v).shape == (1, 2, 0, 2)
    q, k, v = _inputs(1, 1, 3, 4, 2, 0)  # Dv = 0: weights are still defined
    out, w = f(q, k, v, return_weights=True)
    assert out.shape == (1, 1, 3, 0)
    np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-5)


def test_noncontiguous_inputs(backend, tol):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 2, 9, 4)).astype(np.float32)  # [qkv, B, L, H * D] -> [B, H, L, D] views
    q, k, v = (t.reshape(2, 9, 2, 2).transpose(0, 2, 1, 3) for t in x)
    f = kernels.get("attention", backend=backend)
    np.testing.assert_allclose(f(q, k, v, causal=True), ref.attention(q, k, v, causal=True), **tol(np.float32))


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 3), H=st.integers(1, 2), Lq=st.integers(1, 150), Lk=st.integers(1, 300),
    D=st.integers(1, 20), Dv=st.integers(1, 20), causal=st.booleans(), with_lengths=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_numba_and_cython_match_reference_property(B, H, Lq, Lk, D, Dv, causal, with_lengths, seed):
    q, k, v = _inputs(B, H, Lq, Lk, D, Dv, seed=seed)
    q *= 3  # sharper softmax than unit scores
    lengths = np.random.default_rng(seed).integers(0, Lk + 1, B) if with_lengths else None
    want = ref.attention(q, k, v, causal=causal, lengths=lengths)
    for mod in (numba_cpu, cython_cpu):
        got = mod.attention(q, k, v, causal=causal, lengths=lengths)
        # float32 scores of size |s| carry rounding ~|s| * eps into exp: scale atol by the largest score
        smax = float(np.abs(np.matmul(q, np.swapaxes(k, -1, -2))).max()) / math.sqrt(D)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=4 * F32_EPS * max(1.0, smax), err_msg=mod.__name__)


def test_fast_exp2_is_accurate_to_float32():
    """The vectorisable exp2 used by the Numba kernels, against numpy's float64 exp2."""
    from numba import njit

    @njit
    def run(x, y):
        for i in range(x.size):
            y[i] = exp2_nonpos(x[i])

    x = np.linspace(-125, 0, 200_001).astype(np.float32)
    y = np.empty_like(x)
    run(x, y)
    want = np.exp2(x.astype(np.float64))
    assert (np.abs(y - want) / want).max() < 2 * F32_EPS
    y1 = np.empty(3, np.float32)
    run(np.array([-np.inf, -200, 0], np.float32), y1)  # clamped: tiny, never NaN
    assert y1[2] == 1 and (y1[:2] < 1e-37).all() and not np.isnan(y1).any()


@pytest.mark.parametrize("variant", ["baseline", "avx2", "avx512f"])
def test_cython_simd_variants_match_reference(variant, tol):
    """Every compiled variant of the Cython float32 softmax tile this CPU can run (others: nothing to run)."""
    q, k, v = _inputs(2, 2, 70, 140, 16, 8, seed=9)
    want = ref.attention(q, k, v, causal=True, lengths=[100, 140])
    try:
        if cython_cpu._use_simd(variant):
            np.testing.assert_allclose(cython_cpu.attention(q, k, v, causal=True, lengths=[100, 140]), want, **tol(np.float32))
    finally:
        cython_cpu._use_simd(cython_cpu.SIMD)


@pytest.mark.parametrize("serial_macs", [0, 1 << 40])
@pytest.mark.parametrize("lq", [1, 33])
def test_cython_serial_and_threaded_paths_match_reference(serial_macs, lq, tol, monkeypatch):
    """Small calls run on the calling thread, large ones on the thread pool: force each path."""
    monkeypatch.setattr(cython_cpu, "SERIAL_MACS", serial_macs)
    q, k, v = _inputs(3, 4, lq, 57, 16, 24, seed=11)
    for kwargs in (dict(lengths=[57, 0, 20]), dict(causal=True), dict(return_weights=True)):
        got, want = cython_cpu.attention(q, k, v, **kwargs), ref.attention(q, k, v, **kwargs)
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            np.testing.assert_allclose(g, w, **tol(np.float32))


def test_cuda_device_arrays_stay_on_device(on_simulator):
    from seqjit.kernels import _cuda

    try:
        f = kernels.get("attention", backend="cuda")
    except (kernels.KernelUnavailable, _cuda.CudaUnavailable) as exc:  # the cuda fixture's no-GPU skip
        pytest.skip(f"no GPU and no CUDA simulator: {exc}")
    q, k, v = _inputs(1, 1, 9, 6, 3, 2, seed=8)
    dq, dk, dv = (_cuda.to_device(x) for x in (q, k, v))
    dout = _cuda.device_empty((1, 1, 9, 2), np.float32)
    got = f(dq, dk, dv, causal=True, out=dout)
    assert got is dout
    np.testing.assert_allclose(got.copy_to_host(), ref.attention(q, k, v, causal=True), rtol=2e-5, atol=2e-6)
    with pytest.raises(TypeError, match="float32 on the cuda backend"):
        f(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    with pytest.raises(ValueError, match="Dv <= 1024"):
        f(q, k, np.zeros((1, 1, 6, 1025), np.float32))


def _attention_cuda_or_skip():
    from seqjit.kernels import _cuda

    try:
        kernels.get("attention", backend="cuda")
    except (kernels.KernelUnavailable, _cuda.CudaUnavailable) as exc:
        pytest.skip(f"no GPU and no CUDA simulator: {exc}")
    from seqjit.kernels.attention import cuda as attention_cuda

    return attention_cuda


def test_cuda_decode_splits_cover_the_keys():
    ac = _attention_cuda_or_skip()
    for rows in (1, 3, 8, 64, 256, 1024):
        for lk in (1, 2, 63, 64, 65, 255, 256, 257, 1000, 8200):
            splits, chunk = ac.decode_splits(rows, lk)
            assert (splits - 1) * chunk < lk <= splits * chunk and chunk <= ac.DEC_CHUNK, (rows, lk)
            if lk <= ac.DEC_CHUNK and rows >= ac.DEC_TARGET_BLOCKS:
                assert splits == 1  # enough blocks already: no partial results to combine
    assert ac.decode_splits(8, 1000)[0] >= 8  # batch 1, 8 heads over a long cache: split
    assert ac.decode_splits(4, 0) == (1, 1)


def test_cuda_decode_kernel_partials_lengths_and_weights(monkeypatch, tol):
    """Lq = 1 runs the decode kernel (not the row-wise one): here split into chunks of 4 keys, rows
    ending inside a chunk, before it, and at 0; the same from device lengths (clipped to [0, Lk])."""
    ac = _attention_cuda_or_skip()
    from seqjit.kernels import _cuda

    class NoRowwise:
        def __getitem__(self, launch):
            raise AssertionError("row-wise kernel launched")

    monkeypatch.setattr(ac, "_rowwise", NoRowwise())
    monkeypatch.setattr(ac, "DEC_MIN_CHUNK", 4)
    B, H, Lq, Lk, D, Dv = 2, 1, 1, 10, 3, 5
    assert ac.decode_splits(B * H, Lk) == (3, 4)
    q, k, v = _inputs(B, H, Lq, Lk, D, Dv, seed=12)
    q *= 2
    want, want_w = ref.attention(q, k, v, lengths=[5, 0], return_weights=True)
    got, got_w = ac.attention(q, k, v, lengths=np.array([5, 0]), return_weights=True)
    np.testing.assert_allclose(got, want, **tol(np.float32))
    np.testing.assert_allclose(got_w, want_w, **tol(np.float32))
    assert (got[1] == 0).all() and (got_w[1] == 0).all()
    want = ref.attention(q, k, v, causal=True, lengths=[Lk, 8])
    dout = _cuda.device_empty((B, H, Lq, Dv), np.float32)
    dlen = _cuda.to_device(np.array([Lk + 7, 8], np.int32))  # read only on the device: Lk + 7 -> Lk
    assert ac.attention(_cuda.to_device(q), k, v, causal=True, lengths=dlen, out=dout) is dout
    np.testing.assert_allclose(dout.copy_to_host(), want, **tol(np.float32))
    with pytest.raises(ValueError, match=r"lengths must have shape \[2\]"):
        ac.attention(q, k, v, lengths=_cuda.to_device(np.array([1, 2, 3])))
    with pytest.raises(TypeError, match="lengths must hold integers"):
        ac.attention(q, k, v, lengths=_cuda.to_device(np.array([1.0, 2.0])))
    # a head too large for the decode kernel's shared query falls back to the row-wise kernel
    monkeypatch.undo()
    qb, kb, vb = _inputs(1, 1, 1, 3, ac.DEC_DMAX + 1, 2, seed=13)
    np.testing.assert_allclose(ac.attention(qb, kb, vb), ref.attention(qb, kb, vb), **tol(np.float32))


# ------------------------------------------------------------------ bad input, from every backend


def test_bad_input_is_named(backend):
    f = kernels.get("attention", backend=backend)
    q, k, v = _inputs(2, 3, 4, 5, 6, 7)
    cases = [
        (TypeError, "q must be a numpy.ndarray", lambda: f(q.tolist(), k, v)),
        (ValueError, "q must have 4 dimensions", lambda: f(q[0], k, v)),
        (ValueError, "k must have 4 dimensions", lambda: f(q, k[0], v)),
        (TypeError, "q must have dtype", lambda: f(q.astype(np.int32), k, v)),
        (TypeError, "k must have dtype float32", lambda: f(q, k.astype(np.float64), v)),
        (TypeError, "v must have dtype float32", lambda: f(q, k, v.astype(np.float64))),
        (ValueError, r"k must have shape \[2, 3, \*, 6\]", lambda: f(q, k[:1], v)),  # batch
        (ValueError, r"k must have shape \[2, 3, \*, 6\]", lambda: f(q, k[:, :2], v)),  # heads
        (ValueError, r"k must have shape \[2, 3, \*, 6\]", lambda: f(q, k[..., :5], v)),  # head size
        (ValueError, r"v must have shape \[2, 3, 5, \*\]", lambda: f(q, k, v[:, :, :4])),
        (ValueError, "D >= 1", lambda: f(q[..., :0], k[..., :0], v)),
        (ValueError, r"lengths must lie in \[0, 5\]", lambda: f(q, k, v, lengths=[5, 6])),
        (ValueError, r"lengths must lie in \[0, 5\]", lambda: f(q, k, v, lengths=[-1, 2])),
        (ValueError, r"lengths must have shape \[2\]", lambda: f(q, k, v, lengths=[1, 2, 3])),
        (ValueError, "lengths must have 1 dimensions", lambda: f(q, k, v, lengths=[[1, 2]])),
        (TypeError, "lengths must hold integers", lambda: f(q, k, v, lengths=[1.0, 2.0])),
        (ValueError, "scale must be a positive finite number", lambda: f(q, k, v, scale=0)),
        (ValueError, "scale must be a positive finite number", lambda: f(q, k, v, scale=-1.0)),
        (ValueError, "scale must be a positive finite number", lambda: f(q, k, v, scale=float("nan"))),
        (TypeError, "causal must be a bool", lambda: f(q, k, v, causal="yes")),
        (TypeError, "return_weights must be a bool", lambda: f(q, k, v, return_weights=1)),
        (ValueError, "out must be", lambda: f(q, k, v, out=np.empty((2, 3, 4, 6), np.float32))),
        (ValueError, "out must be", lambda: f(q, k, v, out=np.empty((2, 3, 4, 7), np.float64))),
    ]
    for exc, message, call in cases:
        with pytest.raises(exc, match=message):
            call()


def test_registry_lists_attention_backends():
    assert {"reference", "numba", "cython"} <= set(kernels.backends("attention"))
    assert kernels.get("attention") in (numba_cpu.attention, cython_cpu.attention)
    assert cython_cpu.SIMD in ("avx512f", "avx2", "baseline")


def test_demo_runs_and_agrees(capsys):
    """``python -m seqjit demo --kernel`` on a small input: both engines run in their own processes and agree."""
    from seqjit.demos.attention_kernel import naive_attention, run_attention_demo

    q, k, v = _inputs(1, 2, 6, 6, 4, 4, np.float64)
    np.testing.assert_allclose(naive_attention(q, k, v, causal=True), ref.attention(q, k, v, causal=True), rtol=1e-12)
    assert run_attention_demo(length=128, heads=2, dim=16, causal=True) == 0
    printed = capsys.readouterr().out
    assert "naive numpy" in printed and "seqjit attention" in printed and "(agree)" in printed
    with pytest.raises(ValueError, match="length must be a positive integer"):
        run_attention_demo(length=0)
