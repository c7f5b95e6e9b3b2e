"""gru_recurrence_int8 / lstm_recurrence_int8 (int8 W_hh, h quantized per row every step): the
reference against an independent per-row loop (the int8 arithmetic written out, float64 gates) and
against the float32 recurrence it approximates; every backend (and every instruction-set path of the
Cython kernel) against the reference: the int32 sums of every step's hidden product exactly (the
``sums`` output), the outputs and states to 1e-5 relative (backends differ only in their float32
sigmoid/tanh, by a few ulps). Over a sequence those ulps reach the next step's h; a row of h could
then round to int8 differently, rarely: these seeds have no such case, so the sums agree at every step."""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.kernels.linear_int8.reference import quantize_int8
from seqjit.kernels.rnn_int8 import reference as ref

TOL = dict(rtol=1e-5, atol=1e-6)
GATES = {"gru": 3, "lstm": 4}


def _case(mode, B, T, H, seed=0, bias=True, h0=True, lengths=None):
    rng = np.random.default_rng(seed)
    g = GATES[mode]
    w = (rng.standard_normal((g * H, H)) * 0.4).astype(np.float32)
    qw, ws = quantize_int8(w)
    kw = dict(lengths=lengths)
    if h0:
        kw["h0"] = rng.uniform(-1, 1, (B, H)).astype(np.float32)
        if mode == "lstm":
            kw["c0"] = rng.uniform(-2, 2, (B, H)).astype(np.float32)
    xg = rng.standard_normal((B, T, g * H)).astype(np.float32)
    b = rng.standard_normal(g * H).astype(np.float32) if bias else None
    return xg, qw, ws, b, kw, w


def _call(mode, backend, xg, qw, ws, b, kw, **extra):
    out = kernels.get(f"{mode}_recurrence_int8", backend)(xg, qw, ws, b, **kw, **extra)
    return [o if isinstance(o, np.ndarray) else o.copy_to_host() for o in out]


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _naive(mode, xg, qw, ws, b, h0=None, c0=None, lengths=None, reverse=False):
    """Row by row, step by step: quantize h (float32, as linear_int8's reference specifies), int64
    dot products, dequantize, gates in float64 rounded to float32."""
    B, T, GH = xg.shape
    H = GH // GATES[mode]
    out = np.zeros((B, T, H), np.float32)
    h_n, c_n = np.zeros((B, H), np.float32), np.zeros((B, H), np.float32)
    for r in range(B):
        h = np.zeros(H, np.float32) if h0 is None else h0[r].copy()
        c = np.zeros(H, np.float32) if c0 is None else c0[r].copy()
        n = T if lengths is None else int(lengths[r])
        for s in range(n):
            t = n - 1 - s if reverse else s
            amax = np.float32(np.abs(h).max())
            inv = np.float32(127) / amax if amax > 0 else np.float32(0)
            q = np.clip(np.rint(h * inv), -127, 127).astype(np.int64)
            acc = qw.astype(np.int64) @ q
            scales = (np.float32(amax / np.float32(127)) * ws).astype(np.float64)
            hg = acc.astype(np.float32).astype(np.float64) * scales
            hg = (hg + (0 if b is None else b.astype(np.float64))).astype(np.float32).astype(np.float64)
            x = xg[r, t].astype(np.float64)
            if mode == "gru":
                rg, zg = _sigmoid(x[:H] + hg[:H]), _sigmoid(x[H:2 * H] + hg[H:2 * H])
                ng = np.tanh(x[2 * H:] + rg * hg[2 * H:])
                h = ((1 - zg) * ng + zg * h).astype(np.float32)
            else:
                a = x + hg
                i, f, g, o = _sigmoid(a[:H]), _sigmoid(a[H:2 * H]), np.tanh(a[2 * H:3 * H]), _sigmoid(a[3 * H:])
                c = (f * c + i * g).astype(np.float32)
                h = (o * np.tanh(c.astype(np.float64))).astype(np.float32)
            out[r, t] = h
        h_n[r], c_n[r] = h, c
    return (out, h_n) if mode == "gru" else (out, h_n, c_n)


# ---- the reference against independent computations


@pytest.mark.parametrize("mode", ["gru", "lstm"])
@pytest.mark.parametrize("reverse", [False, True])
def test_reference_equals_row_by_row_int8_arithmetic(mode, reverse):
    lengths = np.array([6, 2, 0, 5, 1, 6])
    xg, qw, ws, b, kw, _ = _case(mode, 6, 6, 11, seed=1, lengths=lengths)
    got = ref.__dict__[f"{mode}_recurrence_int8"](xg, qw, ws, b, reverse=reverse, **kw)
    want = _naive(mode, xg, qw, ws, b, reverse=reverse, **kw)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, **TOL)
    assert not got[0][1, 2:].any() and not got[0][2].any()  # padded steps are zero
    np.testing.assert_array_equal(got[1][2], kw["h0"][2])  # a length of 0 keeps the initial state


@pytest.mark.parametrize("mode", ["gru", "lstm"])
def test_reference_is_close_to_the_float32_recurrence(mode):
    """int8 W_hh and int8 h per step against the float32 nn.GRU/nn.LSTM recurrence (seqjit's float
    rnn reference with W_ih = identity, so the input projection is xg itself): the error is the
    quantization's, a few hundredths at most over 8 steps."""
    from seqjit.kernels.rnn import reference as rnn_ref

    H, g = 16, GATES[mode]
    xg, qw, ws, b, kw, w = _case(mode, 4, 8, H, seed=2)
    params = {"weight_ih_l0": np.eye(g * H, dtype=np.float32), "weight_hh_l0": w,
              "bias_ih_l0": np.zeros(g * H, np.float32), "bias_hh_l0": b}
    fn = ref.__dict__[f"{mode}_recurrence_int8"]
    got = fn(xg, qw, ws, b, **kw)
    if mode == "gru":
        want = rnn_ref.gru(xg, params, h0=kw["h0"][None], batch_first=True)
    else:
        out, (h_n, c_n) = rnn_ref.lstm(xg, params, state0=(kw["h0"][None], kw["c0"][None]), batch_first=True)
        want = (out, h_n)
    err = np.abs(got[0] - want[0])
    assert err.max() < 0.05 and err.mean() < 0.01, (err.max(), err.mean())


def test_checks_name_the_argument():
    xg, qw, ws, b, kw, w = _case("gru", 2, 3, 4)
    fn = ref.gru_recurrence_int8
    with pytest.raises(TypeError, match="w_hh must have dtype int8"):
        fn(xg, w, ws, b)
    with pytest.raises(ValueError, match=r"scale must have shape \[12\]"):
        fn(xg, qw, ws[:-1], b)
    with pytest.raises(ValueError, match=r"xg must have shape \[\*, \*, 12\]"):
        fn(xg[..., :-1], qw, ws, b)
    with pytest.raises(ValueError, match=r"h0 must have shape \[2, 4\]"):
        fn(xg, qw, ws, b, h0=np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        fn(xg, qw, ws, b, lengths=[1, 4])
    with pytest.raises(ValueError, match=r"w_hh must have shape \[3\*H, H\]"):
        fn(xg, qw[:-1], ws, b)


# ---- every backend against the reference


def _configs(backend, on_simulator):
    # (B, T, H, bias, h0, lengths, reverse): a decoder step (T = 1), full and packed sequences
    small = backend == "cuda" and on_simulator
    H = 5 if small else 24
    return [(1, 1, H, True, True, None, False), (3, 1, H, False, False, None, False),
            (4, 5, H, True, True, np.array([5, 0, 3, 1]), True), (4, 5, H, True, False, np.array([2, 5, 5, 4]), False)]


@pytest.mark.parametrize("mode", ["gru", "lstm"])
def test_backend_matches_reference(mode, backend, on_simulator):
    for i, (B, T, H, bias, h0, lengths, reverse) in enumerate(_configs(backend, on_simulator)):
        xg, qw, ws, b, kw, _ = _case(mode, B, T, H, seed=10 + i, bias=bias, h0=h0, lengths=lengths)
        sums = [np.full((T, B, GATES[mode] * H), 7, np.int32) for _ in range(2)]
        want = ref.__dict__[f"{mode}_recurrence_int8"](xg, qw, ws, b, reverse=reverse, sums=sums[0], **kw)
        got = _call(mode, backend, xg, qw, ws, b, kw, reverse=reverse, sums=sums[1])
        np.testing.assert_array_equal(sums[1], sums[0], err_msg=f"int32 sums of config {i}")
        steps = T if lengths is None else lengths.max()
        assert (sums[0][:steps].any() or (T == 1 and not h0)) and not sums[0][steps:].any()
        for g, w, what in zip(got, want, ("out", "h_n", "c_n")):
            np.testing.assert_allclose(g, w, **TOL, err_msg=f"{what} of config {i}")
        if h0:
            np.testing.assert_array_equal(kw["h0"], _case(mode, B, T, H, seed=10 + i, h0=h0)[4]["h0"])  # untouched


@pytest.mark.parametrize("path", ["portable", "avx2", "avx512_vnni"])
def test_cython_instruction_set_paths(path):
    from seqjit.kernels.rnn_int8 import cython_cpu

    try:
        if cython_cpu.use_isa(path) != path:
            pytest.skip(f"this CPU has no {path} path")
        for mode in ("gru", "lstm"):
            xg, qw, ws, b, kw, _ = _case(mode, 5, 4, 70, seed=4, lengths=np.array([4, 1, 3, 4, 2]))
            want = ref.__dict__[f"{mode}_recurrence_int8"](xg, qw, ws, b, **kw)
            for g, w in zip(_call(mode, "cython", xg, qw, ws, b, kw), want):
                np.testing.assert_allclose(g, w, **TOL)
    finally:
        cython_cpu.use_isa(None)


def test_cython_threads_equal_one_thread_and_strided_input():
    """A product large enough for OpenMP threads gives the one-thread result; xg may be a view (the
    slice of a merged input projection)."""
    import seqjit

    xg, qw, ws, b, kw, _ = _case("gru", 64, 3, 128, seed=5)
    wide = np.concatenate([xg, xg[..., :7]], axis=-1)
    view = wide[..., :xg.shape[2]]
    fn = kernels.get("gru_recurrence_int8", "cython")
    before = seqjit.get_num_threads()
    try:
        seqjit.set_num_threads(1)
        one = fn(xg, qw, ws, b, **kw)
        seqjit.set_num_threads(2)
        two = fn(view, qw, ws, b, **kw)
    finally:
        seqjit.set_num_threads(before)
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)
