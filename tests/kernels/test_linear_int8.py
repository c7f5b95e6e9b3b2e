"""linear_int8 (per-row int8 quantization, int8 x int8 -> int32, fused dequantize + bias + activation):
the reference against independent float64 computations, every backend (and every instruction-set
path of the Cython kernel) against the reference: the quantized values and int32 sums exactly, the
float output bit for bit without an activation and to 1e-5 relative with one."""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.kernels.linear_int8 import reference as ref
from seqjit.kernels.linear_int8 import spec

ACTIVATIONS = [None, "relu", "gelu", "gelu_tanh", "silu", "tanh"]
# (M, K, N): decode rows (1) and a batch (17, not a multiple of the 4-row tile); K and N off every
# vector width (64 bytes VNNI, 32 AVX2, 16 floats), and a K longer than one block of each
CPU_SHAPES = [(1, 1, 1), (1, 33, 19), (17, 200, 67), (4, 64, 4), (1, 130, 5), (17, 97, 130), (3, 1000, 9)]
SIM_SHAPES = [(1, 1, 1), (1, 33, 5), (5, 9, 7)]


def _data(m, k, n, seed=0, lead=()):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((*lead, m, k)) * rng.uniform(0.1, 3.0, (*lead, m, 1))).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return x, w, b


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else a


def _shapes(backend, on_simulator):
    return SIM_SHAPES if backend == "cuda" and on_simulator else CPU_SHAPES


# ---- the reference against independent float64 computations


def test_reference_quantize_rounds_to_nearest_within_half_a_step():
    x, _, _ = _data(9, 301, 1, seed=1)
    x[3] = 0.0  # an all-zero row: zeros, scale 0
    x[4, 7] = -50.0  # a large negative entry sets that row's scale
    q, scale = ref.quantize_int8(x)
    assert q.dtype == np.int8 and scale.dtype == np.float32 and q.shape == x.shape and scale.shape == (9,)
    amax = np.abs(x.astype(np.float64)).max(axis=1)
    np.testing.assert_allclose(scale, amax / 127, rtol=1e-7)
    assert np.all(np.abs(q.astype(np.int64)) <= 127)
    nonzero = amax > 0
    assert np.all(np.abs(q[nonzero]).max(axis=1) == 127)  # the largest entry maps to +-127
    assert q[4, 7] == -127 and not q[3].any() and scale[3] == 0
    step = np.where(nonzero, amax / 127, 1.0)[:, None]
    # every value is the nearest multiple of the step (to float32 rounding of x * 127 / amax)
    err = np.abs(x.astype(np.float64) - q * step) / step
    assert err.max() <= 0.5 + 1e-5


def test_reference_quantize_rounds_half_to_even():
    # x * (127 / 127) = x exactly: the halves round to the even neighbour, as numpy.rint
    x = np.array([[127.0, 0.5, 1.5, 2.5, -0.5, -1.5, 126.5, -3.5]], np.float32)
    q, scale = ref.quantize_int8(x)
    assert scale[0] == 1.0
    assert q.tolist() == [[127, 0, 2, 2, 0, -2, 126, -4]]


def test_reference_matmul_equals_float64_product():
    rng = np.random.default_rng(2)
    qx = rng.integers(-127, 128, (7, 301)).astype(np.int8)
    qw = rng.integers(-127, 128, (11, 301)).astype(np.int8)
    got = ref.matmul_int8(qx, qw)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, qx.astype(np.float64) @ qw.astype(np.float64).T)  # exact below 2^53


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_reference_linear_equals_float64_dequantized_product(activation):
    from scipy import special

    acts = {None: lambda v: v, "relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
            "gelu": lambda v: 0.5 * v * (1 + special.erf(v / np.sqrt(2))),
            "gelu_tanh": lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3))),
            "silu": lambda v: v / (1 + np.exp(-v))}
    x, w, b = _data(5, 77, 13, seed=3, lead=(2,))
    qw, ws = ref.quantize_int8(w)
    qx, xs = ref.quantize_int8(x)
    want = acts[activation]((qx.astype(np.float64) @ qw.astype(np.float64).T) * xs[..., None] * ws + b)
    got = ref.linear_int8(x, qw, ws, b, activation=activation)
    assert got.shape == (2, 5, 13) and got.dtype == np.float32
    # float32 roundings only: the sum, the scale product and the result (a few ulps of the terms)
    mag = np.abs(qx.astype(np.float64)) @ np.abs(qw.astype(np.float64)).T * xs[..., None] * ws + np.abs(b)
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-7 * mag.max())


def test_quantized_linear_is_close_to_float_linear():
    """The quantization error stays within its bound: with x = qx*xs + ex, w = qw*ws + ew and
    |ex| <= xs/2, |ew| <= ws/2, |x.w - (qx.qw) xs ws| <= xs/2 sum|w| + ws/2 sum|x| + K xs ws / 4."""
    x, w, b = _data(6, 512, 40, seed=4)
    qw, ws = ref.quantize_int8(w)
    _, xs = ref.quantize_int8(x)
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b
    bound = (xs[:, None] / 2 * np.abs(w).sum(1) + ws / 2 * np.abs(x).sum(1)[:, None] + 512 * xs[:, None] * ws / 4)
    err = np.abs(ref.linear_int8(x, qw, ws, b) - exact)
    assert np.all(err <= bound * 1.001 + 1e-5)
    assert err.mean() < 0.1 * bound.mean()  # and is typically far below it (errors cancel)


# ---- every backend against the reference


def test_backend_quantize_and_matmul_exact(backend, on_simulator):
    quantize = kernels.get("quantize_int8", backend=backend)
    matmul = kernels.get("matmul_int8", backend=backend)
    for i, (m, k, n) in enumerate(_shapes(backend, on_simulator)):
        x, w, _ = _data(m, k, n, seed=i)
        q, s = (_host(a) for a in quantize(x))
        q0, s0 = ref.quantize_int8(x)
        np.testing.assert_array_equal(q, q0, err_msg=str((m, k, n)))
        np.testing.assert_array_equal(s, s0)
        qw, _ = ref.quantize_int8(w)
        got = _host(matmul(q0, qw))
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, ref.matmul_int8(q0, qw), err_msg=str((m, k, n)))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_backend_linear_matches_reference(backend, activation, on_simulator):
    f = kernels.get("linear_int8", backend=backend)
    shapes = _shapes(backend, on_simulator)
    if backend == "cuda" and on_simulator:
        shapes = [shapes[ACTIVATIONS.index(activation) % len(shapes)]]
    for i, (m, k, n) in enumerate(shapes):
        x, w, b = _data(m, k, n, seed=10 + i)
        qw, ws = ref.quantize_int8(w)
        bias = b if i % 2 == 0 else None
        want = ref.linear_int8(x, qw, ws, bias, activation=activation)
        got = _host(f(x, qw, ws, bias, activation=activation))
        assert got.shape == (m, n) and got.dtype == np.float32
        if activation is None:
            np.testing.assert_array_equal(got, want, err_msg=str((m, k, n)))
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str((m, k, n)))


def test_backend_extreme_values_and_edges(backend):
    """Every product at +-127 * +-127 (where an unguarded vpmaddubsw would saturate), and the empty
    and leading-dimension cases."""
    f = kernels.get("linear_int8", backend=backend)
    matmul = kernels.get("matmul_int8", backend=backend)
    k = 300 if backend == "cuda" else 2048
    signs = np.where(np.arange(k) % 3 == 0, -1, 1).astype(np.int8)
    qx = np.stack([127 * signs, -127 * signs, np.full(k, -127, np.int8)]).astype(np.int8)
    qw = np.stack([127 * signs, np.full(k, 127, np.int8), -127 * signs, np.full(k, -127, np.int8)]).astype(np.int8)
    np.testing.assert_array_equal(_host(matmul(qx, qw)), ref.matmul_int8(qx, qw))
    assert ref.matmul_int8(qx, qw)[0, 0] == 127 * 127 * k
    x, w, b = _data(3, 5, 4, lead=(2,))
    qw, ws = ref.quantize_int8(w)
    out = np.full((2, 3, 4), np.nan, np.float32)
    assert f(x, qw, ws, b, activation="relu", out=out) is out
    np.testing.assert_allclose(out, ref.linear_int8(x, qw, ws, b, activation="relu"), rtol=1e-5, atol=1e-6)
    # K = 0: the result is activation(bias); M = 0 and N = 0: empty results
    x0 = np.zeros((2, 0), np.float32)
    w0 = np.zeros((4, 0), np.int8)
    np.testing.assert_allclose(_host(f(x0, w0, ws, b, activation="tanh")), np.tanh(np.broadcast_to(b, (2, 4))),
                               rtol=1e-5, atol=1e-6)
    assert _host(f(np.zeros((0, 5), np.float32), qw, ws)).shape == (0, 4)
    assert _host(f(x, np.zeros((0, 5), np.int8), np.zeros(0, np.float32))).shape == (2, 3, 0)


@pytest.mark.parametrize("path", ["avx512_vnni", "avx2", "portable"])
def test_cython_every_instruction_set(path, monkeypatch):
    from seqjit.kernels.linear_int8 import cython_cpu

    try:
        if cython_cpu.use_isa(path) != path:
            pytest.skip(f"this CPU has no {path}")
        ties = np.array([[127.0, 0.5, 1.5, 2.5, -0.5, -1.5, 126.5, -3.5, 4.5, -126.5] * 2], np.float32)
        assert cython_cpu.quantize_int8(ties)[0].tolist() == [[127, 0, 2, 2, 0, -2, 126, -4, 4, -126] * 2]
        # at the default sizes, then with blocks and the threading threshold shrunk so that the
        # small shapes split into several blocks over OpenMP threads
        for small in (False, True):
            if small:
                monkeypatch.setattr(cython_cpu, "BLOCK_COLS", 8)
                monkeypatch.setattr(cython_cpu, "PARALLEL_MACS", 10)
            for i, (m, k, n) in enumerate(CPU_SHAPES + [(64, 2048, 70)]):
                x, w, b = _data(m, k, n, seed=20 + i)
                qw, ws = ref.quantize_int8(w)
                q, s = cython_cpu.quantize_int8(x)
                q0, s0 = ref.quantize_int8(x)
                np.testing.assert_array_equal(q, q0)
                np.testing.assert_array_equal(s, s0)
                np.testing.assert_array_equal(cython_cpu.matmul_int8(q0, qw), ref.matmul_int8(q0, qw))
                act = ACTIVATIONS[i % len(ACTIVATIONS)]
                want = ref.linear_int8(x, qw, ws, b, activation=act)
                got = cython_cpu.linear_int8(x, qw, ws, b, activation=act)
                if act is None:
                    np.testing.assert_array_equal(got, want, err_msg=f"{path} {(m, k, n)}")
                else:
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{path} {(m, k, n)}")
    finally:
        cython_cpu.use_isa(None)


def _weight_at(qw, phase, rng):
    """qw copied into a buffer of random bytes (-128 included) so that its rows start ``phase`` bytes
    after a 64-byte boundary: the bytes around it are not zeros."""
    buf = rng.integers(-128, 128, qw.nbytes + 256, dtype=np.int64).astype(np.int8)
    start = (phase - buf.ctypes.data) % 64 + 64
    out = buf[start:start + qw.nbytes].reshape(qw.shape)
    out[...] = qw
    assert out.ctypes.data % 64 == phase
    return out


@pytest.mark.parametrize("path", ["avx512_vnni", "avx2", "portable"])
def test_cython_weights_off_cache_lines(path):
    """Weight rows starting anywhere in a cache line (NumPy's arrays are 16-byte aligned): the VNNI path
    then reads whole lines from before each row against a zero-padded copy of x (1-3 rows, K a multiple
    of 64 up to 4096); the sums stay exact whatever bytes surround the weight."""
    from seqjit.kernels.linear_int8 import cython_cpu

    rng = np.random.default_rng(30)
    try:
        if cython_cpu.use_isa(path) != path:
            pytest.skip(f"this CPU has no {path}")
        for m, k, n in [(1, 512, 19), (2, 128, 8), (3, 4096, 9), (1, 4160, 5), (1, 576, 3), (4, 512, 11), (5, 512, 7)]:
            x, w, b = _data(m, k, n, seed=m * k + n)
            qw, ws = ref.quantize_int8(w)
            q0, _ = ref.quantize_int8(x)
            want_sums, want = ref.matmul_int8(q0, qw), ref.linear_int8(x, qw, ws, b)
            for phase in (0, 1, 16, 48, 63):
                shifted = _weight_at(qw, phase, rng)
                np.testing.assert_array_equal(cython_cpu.matmul_int8(q0, shifted), want_sums,
                                              err_msg=f"{path} {(m, k, n)} phase {phase}")
                np.testing.assert_array_equal(cython_cpu.linear_int8(x, shifted, ws, b), want,
                                              err_msg=f"{path} {(m, k, n)} phase {phase}")
    finally:
        cython_cpu.use_isa(None)


def test_numba_parallel_path(monkeypatch):
    from seqjit.kernels.linear_int8 import numba_cpu

    monkeypatch.setattr(numba_cpu, "PARALLEL_MACS", 10)
    x, w, b = _data(17, 97, 130, seed=5)
    qw, ws = ref.quantize_int8(w)
    np.testing.assert_array_equal(numba_cpu.linear_int8(x, qw, ws, b), ref.linear_int8(x, qw, ws, b))
    q0, _ = ref.quantize_int8(x)
    np.testing.assert_array_equal(numba_cpu.matmul_int8(q0, qw), ref.matmul_int8(q0, qw))


def test_arguments_are_checked():
    f = kernels.get("linear_int8")
    x, w, b = _data(2, 8, 3)
    qw, ws = ref.quantize_int8(w)
    with pytest.raises(TypeError, match="weight must have dtype int8"):
        f(x, w, ws)
    with pytest.raises(TypeError, match="x must have dtype float32"):
        f(x.astype(np.float64), qw, ws)
    with pytest.raises(ValueError, match="scale must have shape"):
        f(x, qw, ws[:2])
    with pytest.raises(ValueError, match="weight must have shape"):
        f(x[:, :5], qw, ws)
    with pytest.raises(ValueError, match="bias must have shape"):
        f(x, qw, ws, b[:1])
    with pytest.raises(ValueError, match="activation must be one of"):
        f(x, qw, ws, activation="softplus")
    with pytest.raises(ValueError, match="at most K"):
        kernels.get("matmul_int8")(np.zeros((1, spec.K_MAX + 1), np.int8), np.zeros((1, spec.K_MAX + 1), np.int8))


def test_strided_arguments_take_the_full_check(backend, on_simulator):
    """Arguments the quick check passes on to the full one: strided x, weight and bias (copied)."""
    f = kernels.get("linear_int8", backend=backend)
    x, w, b = _data(4, 20, 6, seed=6)
    qw, ws = ref.quantize_int8(w)
    want = ref.linear_int8(np.ascontiguousarray(x[:, ::2]), np.ascontiguousarray(qw[:, ::2]), ws, b[::-1].copy())
    got = _host(f(x[:, ::2], qw[:, ::2], ws, b[::-1].copy() if backend == "cuda" else b[::-1]))
    np.testing.assert_array_equal(got, want)


def test_backend_quantize_rounds_half_to_even(backend):
    """Exact ties (x * 127 / 127 = x): every backend rounds them to the even neighbour, as the
    reference (numpy.rint) does; 20 values so that the vector paths see them too."""
    quantize = kernels.get("quantize_int8", backend=backend)
    row = [127.0, 0.5, 1.5, 2.5, -0.5, -1.5, 126.5, -3.5, 4.5, -126.5] * 2
    q, s = (_host(a) for a in quantize(np.array([row], np.float32)))
    assert s[0] == 1.0
    assert q.tolist() == [[127, 0, 2, 2, 0, -2, 126, -4, 4, -126] * 2]


def test_huge_page_advice_keeps_the_weight():
    """huge_pages.advise: in place (same address, same bytes, same products), only whole 2 MB pages
    inside the array, once per array; small arrays are left alone."""
    from seqjit.kernels.linear_int8 import huge_pages

    rng = np.random.default_rng(31)
    w = rng.integers(-127, 128, (12000, 512), dtype=np.int64).astype(np.int8)  # 6.1 MB
    before, address = w.copy(), w.ctypes.data
    advised = huge_pages.advise(w)
    start, end = address, address + w.nbytes
    inside = (end // huge_pages.HUGE - -(-start // huge_pages.HUGE)) * huge_pages.HUGE
    assert advised in (0, inside) and inside >= huge_pages.HUGE  # (an array of MIN_BYTES holds one)
    assert w.ctypes.data == address
    np.testing.assert_array_equal(w, before)
    assert huge_pages.advise(w) == 0  # once
    assert huge_pages.advise(w[:100].copy()) == 0  # below MIN_BYTES
    x = rng.standard_normal((1, 512)).astype(np.float32)
    ws = np.full(12000, 0.01, np.float32)
    np.testing.assert_array_equal(kernels.get("linear_int8")(x, w, ws), ref.linear_int8(x, before, ws))
