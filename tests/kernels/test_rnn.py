"""gru / lstm / gru_cell / lstm_cell: the reference against PyTorch, every backend against the reference."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjit import kernels
from seqjit.kernels.rnn import _driver
from seqjit.kernels.rnn import reference as ref

MODES = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}
CELLS = {"gru_cell": torch.nn.GRUCell, "lstm_cell": torch.nn.LSTMCell}
TORCH_TOL = dict(rtol=1e-5, atol=1e-6)


def _params(module, dtype=np.float32):
    return {k: v.detach().numpy().astype(dtype) for k, v in module.state_dict().items()}


def _module(mode, I, H, layers=1, bidirectional=False, bias=True, seed=0):
    torch.manual_seed(seed)
    return MODES[mode](I, H, num_layers=layers, bidirectional=bidirectional, bias=bias)


def _state0(mode, h0, c0):
    if h0 is None:
        return {}
    return {"h0": h0} if mode == "gru" else {"state0": (h0, c0)}


def _run(mode, f, x, params, h0=None, c0=None, **kw):
    """Call gru/lstm; return (output, h_n, c_n or None)."""
    out, state = f(x, params, **_state0(mode, h0, c0), **kw)
    return (out, state, None) if mode == "gru" else (out, state[0], state[1])


def _assert_close(got, want, **tol):
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, **tol)


# ---------------------------------------------------------------- reference against PyTorch

CONFIGS = [  # layers, bidirectional, bias, batch_first, h0 given, packed
    (1, False, True, False, False, False),
    (2, True, True, True, True, False),
    (2, True, False, False, True, True),
    (1, True, True, True, False, True),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers,bidir,bias,batch_first,with_h0,packed", CONFIGS)
def test_reference_matches_torch(mode, layers, bidir, bias, batch_first, with_h0, packed):
    T, B, I, H = 7, 5, 6, 9
    m = _module(mode, I, H, layers, bidir, bias)
    m.batch_first = batch_first
    rng = np.random.default_rng(0)
    shape = (B, T, I) if batch_first else (T, B, I)
    x = rng.standard_normal(shape).astype(np.float32)
    D = 2 if bidir else 1
    h0 = rng.standard_normal((layers * D, B, H)).astype(np.float32) if with_h0 else None
    c0 = rng.standard_normal((layers * D, B, H)).astype(np.float32) if with_h0 else None
    lengths = np.array([7, 1, 3, 7, 5]) if packed else None
    tx = torch.from_numpy(x)
    if packed:
        tx = torch.nn.utils.rnn.pack_padded_sequence(tx, torch.from_numpy(lengths), batch_first=batch_first, enforce_sorted=False)
    state = None
    if with_h0:
        state = torch.from_numpy(h0) if mode == "gru" else (torch.from_numpy(h0), torch.from_numpy(c0))
    with torch.no_grad():
        t_out, t_state = m(tx, state)
    if packed:
        t_out, _ = torch.nn.utils.rnn.pad_packed_sequence(t_out, batch_first=batch_first, total_length=T)
    t_h, t_c = (t_state, None) if mode == "gru" else t_state
    got = _run(mode, getattr(ref, mode), x, _params(m), h0, c0, lengths=lengths, batch_first=batch_first)
    want = (t_out.numpy(), t_h.numpy(), None if t_c is None else t_c.numpy())
    _assert_close(got, want, **TORCH_TOL)


@pytest.mark.parametrize("mode", MODES)
def test_reference_zero_length_row_keeps_initial_state(mode):
    """torch cannot pack a length-0 row; seqjit gives it zero output and h_n = h0 (c_n = c0), and the
    other rows are unaffected (checked against torch on those rows alone)."""
    T, B, I, H = 4, 3, 5, 6
    m = _module(mode, I, H, 2, True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    h0 = rng.standard_normal((4, B, H)).astype(np.float32)
    c0 = rng.standard_normal((4, B, H)).astype(np.float32)
    lengths = np.array([4, 0, 2])
    out, h_n, c_n = _run(mode, getattr(ref, mode), x, _params(m), h0, c0, lengths=lengths)
    np.testing.assert_array_equal(out[:, 1], 0)
    np.testing.assert_array_equal(h_n[:, 1], h0[:, 1])
    if mode == "lstm":
        np.testing.assert_array_equal(c_n[:, 1], c0[:, 1])
    keep = [0, 2]
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.from_numpy(x[:, keep]), torch.tensor([4, 2]), enforce_sorted=False)
    state = torch.from_numpy(h0[:, keep]) if mode == "gru" else (torch.from_numpy(h0[:, keep]), torch.from_numpy(c0[:, keep]))
    with torch.no_grad():
        t_out, t_state = m(packed, state)
    t_out, _ = torch.nn.utils.rnn.pad_packed_sequence(t_out, total_length=T)
    np.testing.assert_allclose(out[:, keep], t_out.numpy(), **TORCH_TOL)
    t_h = t_state if mode == "gru" else t_state[0]
    np.testing.assert_allclose(h_n[:, keep], t_h.numpy(), **TORCH_TOL)


@pytest.mark.parametrize("op", CELLS)
@pytest.mark.parametrize("bias,with_state", [(True, True), (False, True), (True, False)])
def test_reference_cells_match_torch(op, bias, with_state):
    B, I, H = 4, 7, 5
    torch.manual_seed(2)
    cell = CELLS[op](I, H, bias=bias)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((B, I)).astype(np.float32)
    h = rng.standard_normal((B, H)).astype(np.float32) if with_state else None
    c = rng.standard_normal((B, H)).astype(np.float32) if with_state else None
    p = _params(cell)
    w = (p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"))
    with torch.no_grad():
        if op == "gru_cell":
            want = cell(torch.from_numpy(x), None if h is None else torch.from_numpy(h)).numpy()
            np.testing.assert_allclose(ref.gru_cell(x, h, *w), want, **TORCH_TOL)
        else:
            state = None if h is None else (torch.from_numpy(h), torch.from_numpy(c))
            want = [t.numpy() for t in cell(torch.from_numpy(x), state)]
            _assert_close(ref.lstm_cell(x, h, c, *w), want, **TORCH_TOL)


# ---------------------------------------------------------------- every backend against the reference


def _case(mode, T, B, I, H, layers, bidir, bias, dtype, seed, lengths="random", with_h0=True):
    m = _module(mode, I, H, layers, bidir, bias, seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, B, I)).astype(dtype)
    n = layers * (2 if bidir else 1)
    h0 = rng.standard_normal((n, B, H)).astype(dtype) if with_h0 else None
    c0 = rng.standard_normal((n, B, H)).astype(dtype) if with_h0 else None
    if lengths == "random":
        lengths = rng.integers(0, T + 1, size=B)
        lengths[0] = T
    return x, _params(m, dtype), h0, c0, lengths


# T, B, I, H: batch sizes around the 4-row micro-kernel, hidden sizes around the 4-unit row groups and
# the 64-unit work blocks (1, 2 and 3 blocks over 2 threads), K around SIMD widths
CPU_SHAPES = [(5, 1, 3, 1), (4, 3, 5, 7), (3, 4, 16, 16), (6, 5, 17, 17), (2, 9, 33, 20), (3, 6, 8, 65), (2, 2, 5, 130)]
SIM_SHAPES = [(3, 1, 3, 5), (3, 3, 17, 6)]  # a few blocks on the simulator, crossing the 16-wide tiles


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers,bidir,bias", [(1, False, True), (2, True, False)])
def test_backend_matches_reference(backend, mode, layers, bidir, bias, tol, on_simulator, monkeypatch):
    # small calls run on one thread (_driver.workers); force the multi-threaded path for half the cases
    if layers == 2:
        monkeypatch.setattr(_driver, "PARALLEL_MIN_MACS", 0)
    sim = backend == "cuda" and on_simulator
    shapes = SIM_SHAPES if sim else CPU_SHAPES
    dtypes = [np.float32] if backend == "cuda" else [np.float32, np.float64]
    f = kernels.get(mode, backend=backend)
    for i, (T, B, I, H) in enumerate(shapes):
        for dtype in dtypes:
            x, p, h0, c0, lengths = _case(mode, T, B, I, H, layers, bidir, bias, dtype, seed=i)
            for kw in ({}, {"lengths": lengths}):
                want = _run(mode, getattr(ref, mode), x, p, h0, c0, **kw)
                _assert_close(_run(mode, f, x, p, h0, c0, **kw), want, **tol(dtype))
            if sim:
                break
    # batch_first, no initial state
    x, p, _, _, lengths = _case(mode, 3, 2, 4, 5, layers, bidir, bias, np.float32, seed=9)
    xb = np.ascontiguousarray(x.transpose(1, 0, 2))
    kw = dict(lengths=lengths, batch_first=True)
    _assert_close(_run(mode, f, xb, p, **kw), _run(mode, getattr(ref, mode), xb, p, **kw), **tol(np.float32))


def test_backend_batch_above_cuda_row_threshold(backend, tol):
    """17 running rows: the cuda hidden GEMM switches to 16x16 tiles; CPU kernels run 4 row blocks + 1."""
    x, p, h0, c0, lengths = _case("gru", 2, 17, 3, 5, 1, False, True, np.float32, seed=3, lengths=None)
    f = kernels.get("gru", backend=backend)
    _assert_close(_run("gru", f, x, p, h0), _run("gru", ref.gru, x, p, h0), **tol(np.float32))


@pytest.mark.parametrize("mode", MODES)
def test_cpu_backends_at_model_size(mode, tol):
    """H = I = 512 (the benchmark size: whole SIMD vectors, 8 work blocks over the threads, large
    enough to run multi-threaded), 3 steps, bidirectional, batch 1 and 6."""
    for B in (1, 6):
        x, p, h0, c0, lengths = _case(mode, 3, B, 512, 512, 1, True, True, np.float32, seed=B)
        want = _run(mode, getattr(ref, mode), x, p, h0, c0, lengths=lengths)
        for backend in ("numba", "cython"):
            got = _run(mode, kernels.get(mode, backend=backend), x, p, h0, c0, lengths=lengths)
            _assert_close(got, want, **tol(np.float32))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("min_rows", [1, 1 << 30], ids=["panel-path", "dot-path"])
def test_cpu_backends_panel_and_dot_paths(mode, min_rows, tol, monkeypatch):
    """Large float32 calls (_driver.use_panels) take the panel path (weights packed into 32-unit
    panels, outer-product kernel over blocks of 3 or 8 rows), the others the dot-product kernel: force
    each path on shapes crossing the 32-unit panels (H = 31, 33, 97), the row blocks (B = 1, 2, 4, 7,
    35) and the split over 2 threads, with 2 bidirectional layers and packed lengths."""
    monkeypatch.setattr(_driver, "PANEL_MIN_ROWS", min_rows)
    monkeypatch.setattr(_driver, "PANEL_MIN_ROW_STEPS", 0)
    monkeypatch.setattr(_driver, "PARALLEL_MIN_MACS", 0)
    shapes = [(3, 1, 5, 31), (4, 2, 33, 33), (3, 4, 40, 97), (2, 7, 64, 64), (3, 35, 9, 40), (2, 19, 7, 32)]
    for i, (T, B, I, H) in enumerate(shapes):
        x, p, h0, c0, lengths = _case(mode, T, B, I, H, 2, True, True, np.float32, seed=i)
        for kw in ({}, {"lengths": lengths}):
            want = _run(mode, getattr(ref, mode), x, p, h0, c0, **kw)
            for backend in ("numba", "cython"):
                got = _run(mode, kernels.get(mode, backend=backend), x, p, h0, c0, **kw)
                _assert_close(got, want, **tol(np.float32))


@pytest.mark.parametrize("op", CELLS)
def test_backend_cells_match_reference(backend, op, tol, on_simulator):
    gates = 3 if op == "gru_cell" else 4
    shapes = [(1, 3, 5), (3, 17, 6)] if backend == "cuda" and on_simulator else [(1, 3, 5), (5, 17, 6), (8, 33, 20)]
    dtypes = [np.float32] if backend == "cuda" else [np.float32, np.float64]
    f = kernels.get(op, backend=backend)
    g = getattr(ref, op)
    for B, I, H in shapes:
        for dtype in dtypes:
            rng = np.random.default_rng(B)
            x = rng.standard_normal((B, I)).astype(dtype)
            h, c = (rng.standard_normal((B, H)).astype(dtype) for _ in range(2))
            w_ih = (rng.standard_normal((gates * H, I)) * 0.3).astype(dtype)
            w_hh = (rng.standard_normal((gates * H, H)) * 0.3).astype(dtype)
            b_ih, b_hh = (rng.standard_normal(gates * H).astype(dtype) for _ in range(2))
            if op == "gru_cell":
                np.testing.assert_allclose(f(x, h, w_ih, w_hh, b_ih, b_hh), g(x, h, w_ih, w_hh, b_ih, b_hh), **tol(dtype))
                np.testing.assert_allclose(f(x, None, w_ih, w_hh), g(x, None, w_ih, w_hh), **tol(dtype))
                out = np.empty((B, H), dtype)
                assert f(x, h, w_ih, w_hh, b_ih, b_hh, out=out) is out
                np.testing.assert_allclose(out, g(x, h, w_ih, w_hh, b_ih, b_hh), **tol(dtype))
            else:
                _assert_close(f(x, h, c, w_ih, w_hh, b_ih, b_hh), g(x, h, c, w_ih, w_hh, b_ih, b_hh), **tol(dtype))
                _assert_close(f(x, None, None, w_ih, w_hh), g(x, None, None, w_ih, w_hh), **tol(dtype))


@pytest.mark.parametrize("backend", ["cuda"], indirect=True)
def test_cuda_device_arrays_stay_on_device(backend, tol):
    from numba import cuda

    x, p, h0, c0, lengths = _case("lstm", 3, 2, 4, 5, 1, False, True, np.float32, seed=4)
    dp = {k: cuda.to_device(v) for k, v in p.items()}
    out, (h_n, c_n) = kernels.get("lstm", backend="cuda")(cuda.to_device(x), dp, state0=(h0, c0), lengths=lengths)
    assert not isinstance(out, np.ndarray) and not isinstance(h_n, np.ndarray)
    _assert_close((out.copy_to_host(), h_n.copy_to_host(), c_n.copy_to_host()),
                  _run("lstm", ref.lstm, x, p, h0, c0, lengths=lengths), **tol(np.float32))


@settings(max_examples=25, deadline=None)
@given(
    mode=st.sampled_from(list(MODES)),
    T=st.integers(1, 6), B=st.integers(1, 7), I=st.integers(1, 20), H=st.integers(1, 21),
    layers=st.integers(1, 2), bidir=st.booleans(), bias=st.booleans(), seed=st.integers(0, 2**31),
    packed=st.booleans(), parallel=st.booleans(),
)
def test_numba_and_cython_match_reference_property(mode, T, B, I, H, layers, bidir, bias, seed, packed, parallel):
    x, p, h0, c0, lengths = _case(mode, T, B, I, H, layers, bidir, bias, np.float32, seed % 1000)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, T + 1, size=B) if packed else None  # any lengths, 0 included
    want = _run(mode, getattr(ref, mode), x, p, h0, c0, lengths=lengths)
    threshold = _driver.PARALLEL_MIN_MACS
    _driver.PARALLEL_MIN_MACS = 0 if parallel else threshold  # also run the multi-threaded path
    try:
        for backend in ("numba", "cython"):
            got = _run(mode, kernels.get(mode, backend=backend), x, p, h0, c0, lengths=lengths)
            _assert_close(got, want, rtol=2e-5, atol=2e-6)
    finally:
        _driver.PARALLEL_MIN_MACS = threshold


# ---------------------------------------------------------------- bad input, from every backend


@pytest.mark.parametrize("mode", MODES)
def test_bad_sequence_input_is_named(backend, mode):
    f = kernels.get(mode, backend=backend)
    x, p, h0, c0, _ = _case(mode, 3, 2, 4, 5, 2, True, True, np.float32, seed=0)
    G = 3 if mode == "gru" else 4
    with pytest.raises(ValueError, match="x must have 3 dimensions"):
        f(x[0], p)
    with pytest.raises(TypeError, match="x must have dtype"):
        f(x.astype(np.int32), p)
    with pytest.raises(TypeError, match="params must be a dict"):
        f(x, list(p.values()))
    with pytest.raises(ValueError, match="missing 'weight_hh_l1'"):
        f(x, {k: v for k, v in p.items() if k != "weight_hh_l1"})
    with pytest.raises(ValueError, match="missing 'bias_hh_l0_reverse'"):
        f(x, {k: v for k, v in p.items() if k != "bias_hh_l0_reverse"})
    with pytest.raises(ValueError, match="unknown key 'weight_hr_l0'"):
        f(x, {**p, "weight_hr_l0": p["weight_hh_l0"]})
    with pytest.raises(ValueError, match=r"params\['weight_ih_l0'\] must have shape \[%d, 4\]" % (G * 5)):
        f(x, {**p, "weight_ih_l0": np.zeros((G * 5, 3), np.float32)})
    with pytest.raises(ValueError, match=r"params\['weight_ih_l1'\] must have shape \[%d, 10\]" % (G * 5)):
        f(x, {**p, "weight_ih_l1": np.zeros((G * 5, 5), np.float32)})
    with pytest.raises(ValueError, match=r"params\['weight_hh_l0'\] must have shape"):
        f(x, {**p, "weight_hh_l0": np.zeros((5, 5), np.float32)})
    with pytest.raises(TypeError, match=r"params\['bias_ih_l1'\] must have dtype float32"):
        f(x, {**p, "bias_ih_l1": p["bias_ih_l1"].astype(np.float64)})
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        f(x, p, lengths=[4, 1])
    with pytest.raises(ValueError, match=r"lengths must have shape \[2\]"):
        f(x, p, lengths=[3, 1, 1])
    with pytest.raises(TypeError, match="lengths must hold integers"):
        f(x, p, lengths=[3.0, 1.0])
    with pytest.raises(TypeError, match="batch_first must be a bool"):
        f(x, p, batch_first="yes")
    if mode == "gru":
        with pytest.raises(ValueError, match=r"h0 must have shape \[4, 2, 5\]"):
            f(x, p, h0=h0[:2])
    else:
        with pytest.raises(TypeError, match=r"state0 must be a \(h0, c0\) pair"):
            f(x, p, state0=h0)
        with pytest.raises(ValueError, match=r"state0\[1\] \(c0\) must have shape \[4, 2, 5\]"):
            f(x, p, state0=(h0, c0[:, :1]))


@pytest.mark.parametrize("op", CELLS)
def test_bad_cell_input_is_named(backend, op):
    f = kernels.get(op, backend=backend)
    G = 3 if op == "gru_cell" else 4
    x, h = np.zeros((2, 4), np.float32), np.zeros((2, 5), np.float32)
    w_ih, w_hh = np.zeros((G * 5, 4), np.float32), np.zeros((G * 5, 5), np.float32)
    args = (x, h) if op == "gru_cell" else (x, h, h)
    with pytest.raises(ValueError, match="x must have 2 dimensions"):
        f(x[0], *args[1:], w_ih, w_hh)
    with pytest.raises(ValueError, match=r"w_hh must have shape \[%d\*H, H\]" % G):
        f(*args, w_ih, np.zeros((5, 5), np.float32))
    with pytest.raises(ValueError, match=r"w_ih must have shape \[%d, 4\]" % (G * 5)):
        f(*args, w_ih[:, :3], w_hh)
    with pytest.raises(ValueError, match=r"b_hh must have shape \[%d\]" % (G * 5)):
        f(*args, w_ih, w_hh, None, np.zeros(7, np.float32))
    with pytest.raises(TypeError, match="w_ih must have dtype float32"):
        f(*args, w_ih.astype(np.float64), w_hh)
    with pytest.raises(ValueError, match=r"h must have shape \[2, 5\]"):
        f(x, h[:1], *args[2:], w_ih, w_hh)
    if op == "gru_cell":
        with pytest.raises(ValueError, match="out must be"):
            f(x, h, w_ih, w_hh, out=np.zeros((5, 2), np.float32))
    else:
        with pytest.raises(ValueError, match=r"c must have shape \[2, 5\]"):
            f(x, h, h[:, :2], w_ih, w_hh)


def test_registry_lists_rnn_backends():
    for op in ("gru", "lstm", "gru_cell", "lstm_cell"):
        assert {"reference", "numba", "cython"} <= set(kernels.backends(op))
