"""The fused float32 attention kernel (kernels/attention/fused.h, run by the Cython backend for two or
more queries): every compiled variant this CPU runs under $SEQJIT_ISA against the NumPy reference
(itself checked against torch SDPA in test_attention.py) and directly against torch SDPA, over
lengths around its blocks (48-192 queries, 64 keys, tiles of 6-12 rows and 8-32 keys), masks, L_q != L_k,
head sizes around the vector widths, and 1 and 2 threads."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import seqjit
from seqjit.kernels.attention import cython_cpu
from seqjit.kernels.attention import reference as ref

VARIANTS = ["baseline", "avx2", "avx512f"]


@pytest.fixture(params=VARIANTS)
def variant(request):
    """Run the Cython kernels as this variant; skipped where this CPU (or $SEQJIT_ISA) lacks it."""
    try:
        if not cython_cpu._use_simd(request.param):
            pytest.skip(f"this CPU (under $SEQJIT_ISA) cannot run the {request.param} variant")
        yield request.param
    finally:
        cython_cpu._use_simd(cython_cpu.SIMD)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request, monkeypatch):
    """1 or 2 threads, the thread pool used even for small calls (SERIAL_MACS 0)."""
    monkeypatch.setattr(cython_cpu, "SERIAL_MACS", 0)
    monkeypatch.setattr(cython_cpu, "FUSED_MIN_QUERIES", 1)  # one query too: the kernel, not the fallback
    before = seqjit.get_num_threads()
    seqjit.set_num_threads(request.param)
    yield request.param
    seqjit.set_num_threads(before)


def _inputs(B, H, Lq, Lk, D, Dv, seed, sharp=1.0):
    rng = np.random.default_rng(seed)
    q = (sharp * rng.standard_normal((B, H, Lq, D))).astype(np.float32)
    k = rng.standard_normal((B, H, Lk, D)).astype(np.float32)
    v = rng.standard_normal((B, H, Lk, Dv)).astype(np.float32)
    return q, k, v


def _check(q, k, v, **kwargs):
    want = ref.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), **kwargs)
    got = cython_cpu.attention(q, k, v, **kwargs)
    assert got.dtype == np.float32 and not np.isnan(got).any()
    # float32 scores of size |s| carry rounding ~|s| * eps into exp: atol scaled by the largest score
    smax = float(np.abs(np.matmul(q, np.swapaxes(k, -1, -2))).max()) * kwargs.get("scale", 1 / math.sqrt(q.shape[-1]))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=8 * np.finfo(np.float32).eps * max(1.0, smax),
                               err_msg=str(kwargs))
    return got


# (Lq, Lk): odd lengths on both sides of the query block (48), key block (64) and tiles
LENGTHS = [(1, 1), (1, 65), (7, 7), (7, 63), (63, 65), (65, 63), (49, 2049), (2049, 7), (97, 130)]


@pytest.mark.parametrize("Lq, Lk", LENGTHS, ids=[f"{a}x{b}" for a, b in LENGTHS])
def test_fused_matches_reference(variant, threads, Lq, Lk):
    B, H, D, Dv = 3, 2, 16, 24
    q, k, v = _inputs(B, H, Lq, Lk, D, Dv, seed=Lq * 7 + Lk, sharp=3.0)
    lengths = np.array([Lk, max(1, Lk // 3), max(0, Lk - 5)])
    for kwargs in ({}, dict(causal=True), dict(lengths=lengths), dict(causal=True, lengths=lengths, scale=0.37)):
        _check(q, k, v, **kwargs)


@pytest.mark.parametrize("D, Dv", [(1, 1), (5, 3), (8, 37), (33, 48), (64, 64), (160, 130)])
def test_fused_head_sizes(variant, threads, D, Dv):
    """Head sizes below, at and past the vector widths: whole output tiles, one vector, scalar tails."""
    q, k, v = _inputs(2, 1, 50, 70, D, Dv, seed=D * 131 + Dv)
    _check(q, k, v, causal=True, lengths=np.array([70, 33]))


@pytest.mark.parametrize("B, H, Lq", [(1, 1, 385), (1, 3, 200), (4, 2, 193)])
def test_fused_work_item_sizes(variant, threads, B, H, Lq):
    """Work items of 192, 96 or 48 queries (fewer when there would be under two per thread), cut
    across the rows: a single one, two, and one row past a whole item."""
    q, k, v = _inputs(B, H, Lq, 130, 16, 16, seed=Lq + B)
    _check(q, k, v, causal=True, lengths=np.arange(130, 130 - B, -1))


def test_fused_2049_matches_sdpa(variant, threads):
    """The kernel directly against torch SDPA (its own mask), self-attention past 2048."""
    q, k, v = _inputs(1, 2, 2049, 2049, 64, 64, seed=5)
    for causal in (False, True):
        got = cython_cpu.attention(q, k, v, causal=causal)
        want = F.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)), is_causal=causal).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=f"causal={causal}")


def test_fused_cross_attention_with_lengths_matches_sdpa(variant, threads):
    B, H, Lq, Lk = 3, 2, 70, 131
    q, k, v = _inputs(B, H, Lq, Lk, 32, 32, seed=6)
    lengths = np.array([131, 64, 65])
    keep = torch.from_numpy(np.arange(Lk)[None, None, None, :] < lengths[:, None, None, None])
    want = F.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)), attn_mask=keep).numpy()
    np.testing.assert_allclose(cython_cpu.attention(q, k, v, lengths=lengths), want, rtol=1e-4, atol=2e-5)


def test_fused_growing_scores_rescale(variant, threads):
    """Scores that rise block after block: every key block raises the running max (the rescale path)."""
    Lk = 300
    q = np.ones((1, 1, 9, 4), np.float32)
    k = np.repeat((np.arange(Lk, dtype=np.float32) / 20)[None, None, :, None], 4, axis=3)  # score j / 10
    v = np.random.default_rng(8).standard_normal((1, 1, Lk, 5)).astype(np.float32)
    _check(q, k, v)
    _check(q, k[:, :, ::-1].copy(), v)  # falling: the first block holds the max


def test_fused_fully_masked_rows_are_zero_not_nan(variant, threads):
    """Causal with Lq > Lk (the first Lq - Lk queries see no key) and a batch row of length 0."""
    Lq, Lk = 150, 61
    q, k, v = _inputs(2, 2, Lq, Lk, 16, 16, seed=9)
    out = _check(q, k, v, causal=True, lengths=np.array([Lk, 0]))
    assert (out[1] == 0).all() and (out[0, :, : Lq - Lk] == 0).all()
    assert (np.abs(out[0, :, Lq - Lk:]) > 0).any(axis=-1).all()


def test_fused_out_argument_and_strided_inputs(threads):
    x = np.random.default_rng(10).standard_normal((3, 2, 70, 2 * 16)).astype(np.float32)
    q, k, v = (t.reshape(2, 70, 2, 16).transpose(0, 2, 1, 3) for t in x)  # [B, L, H * D] -> [B, H, L, D] views
    out = np.empty((2, 2, 70, 16), np.float32)
    assert cython_cpu.attention(q, k, v, causal=True, out=out) is out
    np.testing.assert_allclose(out, ref.attention(q, k, v, causal=True), rtol=2e-5, atol=2e-6)


def test_one_query_keeps_the_blocked_kernel(monkeypatch):
    """A decode step (Lq = 1) runs the blocked BLAS kernel, not the fused one (FUSED_MIN_QUERIES)."""
    calls = []
    monkeypatch.setattr(cython_cpu, "_run_fused", lambda *a: calls.append(a))
    q, k, v = _inputs(4, 2, 1, 40, 16, 16, seed=11)
    np.testing.assert_allclose(cython_cpu.attention(q, k, v), ref.attention(q, k, v), rtol=2e-5, atol=2e-6)
    assert not calls
    q, k, v = _inputs(1, 1, 2, 40, 16, 16, seed=12)
    cython_cpu.attention(q, k, v)
    assert len(calls) == 1
