"""One op-test harness (as ONNX Runtime's ``OpTester`` and ggml's ``test-backend-ops``): every case of
an op runs on every backend that claims the op (``seqjit.kernels.backends``, the ``native`` replay
kernels among them, and cuda on numba's simulator without a GPU), against the NumPy reference.

A backend that claims an op takes all its cases: a native kernel that cannot run a case raises
KernelUnavailable, and that fails here. Adding an op to the native backend without cases here fails
too (``test_every_native_op_has_cases``).
"""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.graph.native_backend import NATIVE_OPS

F32 = dict(rtol=2e-5, atol=2e-6)  # as tests/conftest.py's TOL for float32


def _rng(seed):
    return np.random.default_rng(seed)


def _linear_cases():
    for k, (m, n, kk) in enumerate([(1, 7, 13), (3, 33, 37), (6, 64, 130), (13, 48, 40)]):
        rng = _rng(k)
        x = rng.standard_normal((m, kk)).astype(np.float32)
        w = (rng.standard_normal((n, kk)) / np.sqrt(kk)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        yield f"{m}x{kk}x{n}", (x, w, b), {}
        yield f"{m}x{kk}x{n}-relu-nobias", (x, w), dict(activation="relu")
        yield f"{m}x{kk}x{n}-gelu-in_out", (x, np.ascontiguousarray(w.T), b), dict(activation="gelu", weight_layout="in_out")
    x = _rng(9).standard_normal((2, 3, 16)).astype(np.float32)
    w = _rng(10).standard_normal((8, 16)).astype(np.float32) / 4
    yield "batched-3d", (x, w), {}


def _layer_norm_cases():
    for k, shape in enumerate([(1, 8), (4, 32), (2, 3, 130)]):
        rng = _rng(20 + k)
        d = shape[-1]
        x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
        yield f"{shape}", (x, (1 + rng.standard_normal(d) / 10).astype(np.float32),
                           rng.standard_normal(d).astype(np.float32)), {}
        yield f"{shape}-eps", (x, np.ones(d, np.float32), np.zeros(d, np.float32)), dict(eps=1e-3)


def _embedding_cases():
    table = _rng(30).standard_normal((50, 24)).astype(np.float32)
    ids = _rng(31).integers(0, 50, (3, 7))
    yield "plain", (ids, table), {}
    yield "scaled", (ids, table), dict(scale=4.9)
    yield "positions", (ids, table), dict(scale=2.0, positions=_rng(32).standard_normal((7, 24)).astype(np.float32))


def _half_bits(shape, fmt, seed, scale):
    w = (_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    return kernels.get("narrow_half", "reference")(w, fmt)


def _linear_half_cases():
    for fmt in ("float16", "bfloat16"):
        for k, (m, n, kk) in enumerate([(1, 7, 13), (1, 40, 64), (3, 33, 37), (17, 48, 130)]):
            rng = _rng(60 + k)
            x = rng.standard_normal((m, kk)).astype(np.float32)
            w = _half_bits((n, kk), fmt, 70 + k, 1 / np.sqrt(kk))
            b = rng.standard_normal(n).astype(np.float32)
            yield f"{fmt}-{m}x{kk}x{n}", (x, w, b), dict(fmt=fmt)
            yield f"{fmt}-{m}x{kk}x{n}-relu-nobias", (x, w), dict(fmt=fmt, activation="relu")


def _embedding_half_cases():
    ids = _rng(31).integers(0, 50, (3, 7))
    for fmt in ("float16", "bfloat16"):
        table = _half_bits((50, 24), fmt, 33, 1.0)
        yield f"{fmt}-plain", (ids, table), dict(fmt=fmt)
        yield f"{fmt}-positions", (ids, table), dict(fmt=fmt, scale=2.0,
                                                     positions=_rng(32).standard_normal((7, 24)).astype(np.float32))


def _activation_cases(name):
    def cases():
        for k, shape in enumerate([(5,), (3, 17), (2, 4, 64)]):
            x = (_rng(40 + k).standard_normal(shape) * 4).astype(np.float32)
            yield f"{shape}", (x,), {}
            if name == "gelu":
                yield f"{shape}-tanh", (x,), dict(approximate="tanh")
    return cases


def _softmax_cases():
    x = (_rng(50).standard_normal((4, 33)) * 5).astype(np.float32)
    yield "plain", (x,), {}
    yield "masked", (x, _rng(51).random((4, 33)) > 0.3), {}


CASES = {"linear": _linear_cases, "layer_norm": _layer_norm_cases, "embedding": _embedding_cases,
         "softmax": _softmax_cases, "log_softmax": _softmax_cases,
         "linear_half": _linear_half_cases, "embedding_half": _embedding_half_cases,
         **{name: _activation_cases(name) for name in ("relu", "gelu", "silu", "tanh")}}


def _params():
    for op, cases in CASES.items():
        for backend in kernels.backends(op):
            if backend != "reference":
                for case, args, kwargs in cases():
                    yield pytest.param(op, backend, args, kwargs, id=f"{op}-{backend}-{case}")


@pytest.mark.parametrize("op,backend,args,kwargs", list(_params()))
def test_backend_equals_reference(op, backend, args, kwargs):
    want = kernels.get(op, "reference")(*args, **kwargs)
    got = kernels.get(op, backend)(*args, **kwargs)
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **F32)


def test_every_native_op_has_cases_and_is_claimed():
    assert set(NATIVE_OPS) <= set(CASES), set(NATIVE_OPS) - set(CASES)
    for op in NATIVE_OPS:
        assert "native" in kernels.backends(op), op
    assert "native" not in kernels.backends("softmax")  # claimed only where a native kernel exists
    with pytest.raises(kernels.KernelUnavailable):
        kernels.get("softmax", "native")


def test_the_default_backend_is_never_native():
    for op in NATIVE_OPS:
        assert kernels.get(op) is not kernels.get(op, "native")


def test_a_native_case_the_replay_cannot_run_natively_is_an_error():
    """float64 has no native linear: the backend says so rather than running another kernel."""
    x = np.ones((2, 3))
    with pytest.raises(kernels.KernelUnavailable, match="native linear"):
        kernels.get("linear", "native")(x, np.ones((4, 3)))
