"""The portable BLAS loops (kernels/_sj_blas_fallback.h) that the Cython linear and attention kernels
run when scipy (the ``blas`` extra) is not installed: switched on in this process with
``_select_blas(False)`` and compared with the NumPy reference on shapes that reach every GEMM/GEMV
call (one row: GEMV in both layouts; row blocks; column blocks; transposed and untransposed tiles,
beta 0 and 1 in attention). tests/test_optional_extras.py runs the same kernels with scipy absent."""
import numpy as np
import pytest

from seqjit.kernels.attention import cython_cpu as attention_cy
from seqjit.kernels.attention import reference as attention_ref
from seqjit.kernels.linear import cython_cpu as linear_cy
from seqjit.kernels.linear import reference as linear_ref

ATOL = {np.float32: 2e-4, np.float64: 1e-11}
RTOL = {np.float32: 1e-4, np.float64: 1e-11}


@pytest.fixture
def fallback():
    """The Cython linear and attention kernels on the portable loops for one test, then back."""
    before = (linear_cy.blas_source(), attention_cy.blas_source())
    assert linear_cy._select_blas(False) == "fallback" and attention_cy._select_blas(False) == "fallback"
    yield
    linear_cy._select_blas(before[0] == "scipy")
    attention_cy._select_blas(before[1] == "scipy")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["out_in", "in_out"])
@pytest.mark.parametrize("m, k, n", [(1, 37, 53), (5, 64, 96), (3, 0, 7), (70, 9, 203)])
def test_cython_linear_on_the_fallback_matches_the_reference(fallback, monkeypatch, dtype, layout, m, k, n):
    # blocks of 4 KB: 70 rows of 203 columns are row tiles of 32 split into column blocks of 16-32
    monkeypatch.setattr(linear_cy, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(linear_cy, "TILE_ROWS", 32)
    monkeypatch.setattr(linear_cy, "MIN_BLOCK_COLS", 16)
    rng = np.random.default_rng(m * 1000 + k)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    w = w if layout == "out_in" else np.ascontiguousarray(w.T)
    for activation in (None, "gelu"):
        got = linear_cy.linear(x, w, b, activation=activation, weight_layout=layout)
        want = linear_ref.linear(x, w, b, activation=activation, weight_layout=layout)
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=ATOL[dtype] * max(1.0, np.sqrt(k)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("return_weights", [False, True])
def test_cython_attention_on_the_fallback_matches_the_reference(fallback, dtype, return_weights):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in ((2, 2, 70, 16), (2, 2, 150, 16), (2, 2, 150, 24)))
    for kwargs in (dict(), dict(causal=True, lengths=[150, 90])):
        got = attention_cy.attention(q, k, v, return_weights=return_weights, **kwargs)
        want = attention_ref.attention(q, k, v, return_weights=return_weights, **kwargs)
        for g, w in zip(got, want) if return_weights else [(got, want)]:
            np.testing.assert_allclose(g, w, rtol=RTOL[dtype], atol=ATOL[dtype])


def test_scipy_blas_is_used_when_installed():
    """The test extra installs scipy: the kernels tested elsewhere run on its OpenBLAS."""
    import scipy  # noqa: F401  (a test requirement: its absence is a failure here, not a skip)

    assert linear_cy.blas_source() == "scipy" and attention_cy.blas_source() == "scipy"
