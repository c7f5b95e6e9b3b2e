"""Native replay: each op lowered to the VM against the NumPy reference kernels, and whole plans
against the Python replay (ids identical, logits within 1e-5) for every architecture."""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder

rng = np.random.default_rng(7)
TOL = dict(rtol=2e-5, atol=2e-5)


def f32(*shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def run_native(build, feeds):
    """Run the one-op graph natively; check it lowered with no Python callback instruction."""
    g = GraphBuilder("one")
    build(g)
    ex = Executor(g.build(), passes=(), replay="native")
    out = ex.run(feeds)
    plan = ex.plan_for(feeds)
    assert plan.native, "the plan did not lower"
    assert all(kind == "native" for _, _, kind in plan.native.low.labels), plan.native.low.labels
    return out


@pytest.mark.parametrize("m", [1, 3, 4, 5, 7, 9, 11, 12, 13, 23, 64])  # each row-block kernel, full and part
@pytest.mark.parametrize("k,n", [(128, 384), (37, 5), (64, 100), (200, 33), (1100, 40), (80, 36)])  # K 1100 > 1024: rows not packed
@pytest.mark.parametrize("act,bias,layout", [(None, True, "out_in"), ("gelu", False, "out_in"),
                                             ("silu", True, "in_out"), ("tanh", True, "out_in"),
                                             ("gelu_tanh", True, "in_out"), ("relu", False, "out_in")])
def test_linear(m, k, n, act, bias, layout):
    x = f32(m, k)
    w = f32(n, k, scale=0.2) if layout == "out_in" else f32(k, n, scale=0.2)
    b = f32(n) if bias else None

    def build(g):
        xi = g.input("x", dtype="float")
        g.output(g.op("linear", xi, g.constant("w", w), g.constant("b", b) if bias else None, activation=act,
                      weight_layout=layout), name="y")

    y = run_native(build, {"x": x})["y"]
    ref = kernels.get("linear", "reference")(x, w, b, activation=act, weight_layout=layout)
    np.testing.assert_allclose(y, ref, **TOL)


def test_linear_parallel_columns_equal_serial():
    import seqjit

    x, w = f32(1, 512), f32(4099, 512, scale=0.1)

    def build(g):
        g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", w)), name="y")

    ref = kernels.get("linear", "reference")(x, w)
    before = seqjit.get_num_threads()
    try:
        for threads in (1, 2):
            seqjit.set_num_threads(threads)
            np.testing.assert_allclose(run_native(build, {"x": x})["y"], ref, **TOL)
    finally:
        seqjit.set_num_threads(before)


@pytest.mark.parametrize("op,attrs,ref", [("relu", {}, "relu"), ("gelu", {}, "gelu"),
                                          ("gelu", {"approximate": "tanh"}, "gelu_tanh"), ("silu", {}, "silu"),
                                          ("tanh", {}, "tanh")])
def test_activations_over_the_whole_float_range(op, attrs, ref):
    """The per-instruction-set C loops (activations/native_act.h) against the reference, from the
    exp clamps (|x| ~ 88) through the polynomial switch points to 0, at a length that is no
    multiple of any vector width."""
    x = np.concatenate([np.linspace(-120, 120, 2001), np.linspace(-1.5, 1.5, 1001),
                        [0.0, -0.0, 0.625, -0.625, 1.0, -1.0, 87.3, -87.4, 88.8, -88.8]]).astype(np.float32)[None]

    def build(g):
        g.output(g.op(op, g.input("x", dtype="float"), **attrs), name="y")

    if ref == "gelu_tanh":
        want = kernels.get("gelu", "reference")(x, approximate="tanh")
    else:
        want = kernels.get(ref, "reference")(x)
    np.testing.assert_allclose(run_native(build, {"x": x})["y"], want, **TOL)


@pytest.mark.parametrize("shape", [(1, 128), (5, 3, 48), (2, 7)])
def test_layer_norm(shape):
    x, g_, b_ = f32(*shape, scale=3.0) + 1.0, f32(shape[-1]), f32(shape[-1])

    def build(g):
        g.output(g.op("layer_norm", g.input("x", dtype="float"), g.constant("g", g_), g.constant("b", b_), eps=1e-6),
                 name="y")

    ref = kernels.get("layer_norm", "reference")(x, g_, b_, eps=1e-6)
    np.testing.assert_allclose(run_native(build, {"x": x})["y"], ref, **TOL)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,lk", [(1, 9), (6, 6), (3, 8)])
def test_attention(causal, lq, lk):
    q, k, v = f32(3, 2, lq, 16), f32(3, 2, lk, 16), f32(3, 2, lk, 8)
    lengths = np.array([lk, 2, 0], np.int64)

    def build(g):
        o = g.op("attention", g.input("q", dtype="float"), g.input("k", dtype="float"), g.input("v", dtype="float"),
                 g.input("lengths", dtype="int"), causal=causal)
        g.output(o, name="o")

    out = run_native(build, {"q": q, "k": k, "v": v, "lengths": lengths})["o"]
    ref = kernels.get("attention", "reference")(q, k, v, causal=causal, lengths=lengths)
    np.testing.assert_allclose(out, ref, **TOL)


def test_embedding_with_positions_and_bad_id():
    table, pos = f32(11, 6), f32(4, 6)
    ids = rng.integers(0, 11, (3, 4))

    def build(g):
        g.output(g.op("embedding", g.input("ids", dtype="int"), g.constant("t", table), g.constant("p", pos),
                      scale=2.5), name="y")

    ref = kernels.get("embedding", "reference")(ids, table, scale=2.5, positions=pos)
    np.testing.assert_allclose(run_native(build, {"ids": ids})["y"], ref, **TOL)
    bad = ids.copy()
    bad[1, 2] = 11
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 11\)"):
        run_native(build, {"ids": bad})


@pytest.mark.parametrize("batch,hidden", [(1, 24), (5, 16)])
def test_gru_and_lstm_cells(batch, hidden):
    i = 10
    x, h, c = f32(batch, i), f32(batch, hidden), f32(batch, hidden)
    w3 = (f32(3 * hidden, i, scale=0.3), f32(3 * hidden, hidden, scale=0.3), f32(3 * hidden), f32(3 * hidden))
    w4 = (f32(4 * hidden, i, scale=0.3), f32(4 * hidden, hidden, scale=0.3), f32(4 * hidden), f32(4 * hidden))

    def gru(g):
        ws = [g.constant(f"w{j}", a) for j, a in enumerate(w3)]
        g.output(g.op("gru_cell", g.input("x", dtype="float"), g.input("h", dtype="float"), *ws), name="y")

    def lstm(g):
        ws = [g.constant(f"w{j}", a) for j, a in enumerate(w4)]
        ho, co = g.op("lstm_cell", g.input("x", dtype="float"), g.input("h", dtype="float"),
                      g.input("c", dtype="float"), *ws, outputs=2)
        g.output(ho, name="h1")
        g.output(co, name="c1")

    ref = kernels.get("gru_cell", "reference")(x, h, *w3)
    np.testing.assert_allclose(run_native(gru, {"x": x, "h": h})["y"], ref, **TOL)
    h_ref, c_ref = kernels.get("lstm_cell", "reference")(x, h, c, *w4)
    out = run_native(lstm, {"x": x, "h": h, "c": c})
    np.testing.assert_allclose(out["h1"], h_ref, **TOL)
    np.testing.assert_allclose(out["c1"], c_ref, **TOL)


@pytest.mark.parametrize("b", [3, 6])
def test_additive_attention(b):
    s, a, dq, dk = 7, 12, 9, 5
    q, kp, k, wq, v = f32(b, dq), f32(b, s, a), f32(b, s, dk), f32(a, dq, scale=0.3), f32(a)
    lengths = np.array([7, 3, 0, 1, 7, 4][:b], np.int64)

    def build(g):
        ctx, w = g.op("additive_attention", g.input("q", dtype="float"), g.input("kp", dtype="float"),
                      g.input("k", dtype="float"), g.constant("wq", wq), g.constant("v", v),
                      g.input("lengths", dtype="int"), outputs=2)
        g.output(ctx, name="ctx")
        g.output(w, name="w")

    out = run_native(build, {"q": q, "kp": kp, "k": k, "lengths": lengths})
    ctx_ref, w_ref = kernels.get("additive_attention", "reference")(q, kp, k, wq, v, lengths=lengths)
    np.testing.assert_allclose(out["ctx"], ctx_ref, **TOL)
    np.testing.assert_allclose(out["w"], w_ref, **TOL)


def test_inputs_that_move_are_followed():
    """A second run with arrays at other addresses reads the new arrays (pointer patching)."""
    w = f32(8, 8)

    def build(g):
        x = g.input("x", dtype="float")
        h = g.op("linear", g.op("reshape", x, shape=(-1, 8)), g.constant("w", w))
        g.output(g.op("add", h, g.op("reshape", g.input("r", dtype="float"), shape=(-1, 8))), name="y")

    g = GraphBuilder("moves")
    build(g)
    ex = Executor(g.build(), passes=(), replay="native")
    for _ in range(3):
        x, r = f32(2, 4, 8), f32(8, 8)
        np.testing.assert_allclose(ex.run({"x": x, "r": r})["y"], x.reshape(-1, 8) @ w.T + r, **TOL)


# -- whole models: native against the Python replay ------------------------------------------------
@pytest.fixture(scope="module")
def model_pairs(make_tiny_marian, tmp_path_factory):
    """(name, native model, python model, sources) for the three architectures."""
    import seqjit
    from seqjit.g2p import G2P

    path = tmp_path_factory.mktemp("marian")
    make_tiny_marian(seed=3).save_pretrained(path)
    pairs = []
    marian_n, marian_p = seqjit.from_hf(path), seqjit.from_hf(path)
    marian_n.set_replay("native")
    marian_p.set_replay("python")
    srcs = [list(rng.integers(1, 94, n)) + [0] for n in (5, 9, 2, 13)]
    pairs.append(("transformer", marian_n, marian_p, srcs))
    for name in ("gru", "attention", "transformer"):
        a, b = G2P(name).model, G2P(name).model
        a.set_replay("native")
        b.set_replay("python")
        words = [list(rng.integers(3, a.source_vocab_size, n)) for n in (4, 11, 7, 1)]
        pairs.append((f"g2p-{name}", a, b, words))
    return pairs


@pytest.mark.parametrize("case", range(4), ids=["marian", "g2p-gru", "g2p-attention", "g2p-transformer"])
def test_models_native_equals_python(model_pairs, case):
    from seqjit.decoding.api import pad_sources

    name, native, python, sources = model_pairs[case]
    ids, lens = pad_sources(sources, native.pad_id)
    tgt = np.array([[native.decoder_start_id] + list(rng.integers(3, native.target_vocab_size, 6))
                    for _ in sources], np.int64)
    if name != "g2p-attention":  # its recurrence carries each step's rounding on: tests/graph/test_attention_rnn_rounding.py
        np.testing.assert_allclose(native.logits_stepwise(ids, tgt, lens), python.logits_stepwise(ids, tgt, lens),
                                   rtol=1e-5, atol=1e-5)
    for opts in (dict(max_length=12), dict(max_length=10, min_length=6, return_scores=True),
                 dict(max_length=8, beam_size=3, num_hypotheses=2, return_scores=True)):
        got, want = native.generate(sources, **opts), python.generate(sources, **opts)
        assert [r.ids for r in got] == [r.ids for r in want], opts
        if opts.get("return_scores"):
            np.testing.assert_allclose([s for r in got for s in r.scores], [s for r in want for s in r.scores],
                                       rtol=1e-5, atol=1e-5)
        one_by_one = [native.generate([s], **opts)[0].ids for s in sources]
        assert one_by_one == [r.ids for r in want]


def test_native_greedy_runs_no_python_per_token(model_pairs, monkeypatch):
    """Plain greedy decodes in one native call: no plan runs through Python after the encoder."""
    from seqjit.graph.executor import Plan

    _, native, python, sources = model_pairs[0]
    want = [r.ids for r in python.generate(sources, max_length=12)]
    calls = []
    real_run = Plan.run
    monkeypatch.setattr(Plan, "run", lambda self, *a, **k: calls.append(self.graph.name) or real_run(self, *a, **k))
    assert [r.ids for r in native.generate(sources, max_length=12)] == want
    assert calls == []  # a small batch: a GreedyRunner runs the encoder's program too
    many = sources * 4  # 16 rows: the general path (compaction), the encoder through its plan
    assert [r.ids for r in native.generate(many, max_length=12)] == want * 4
    assert calls and set(calls) == {"encoder"}  # once per part of the batch (a part per thread)


@pytest.mark.parametrize("mode", ["gru", "lstm"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("layers,dirs", [(1, 1), (2, 2)])
@pytest.mark.parametrize("b", [3, 6])  # up to 4 rows: weights as stored; more: packed copies
@pytest.mark.parametrize("hh", ["finite", "inf"])  # a zero start skips h W_hh only while 0 * W_hh is 0
def test_rnn_sequences(mode, batch_first, layers, dirs, b, hh):
    t, i, h = 6, 5, 8
    g = 3 if mode == "gru" else 4
    params = {}
    for k in range(layers):
        for d in range(dirs):
            sfx = f"_l{k}" + ("_reverse" if d else "")
            params["weight_ih" + sfx] = f32(g * h, i if k == 0 else dirs * h, scale=0.4)
            params["weight_hh" + sfx] = f32(g * h, h, scale=0.4)
            params["bias_ih" + sfx], params["bias_hh" + sfx] = f32(g * h), f32(g * h)
    if hh == "inf":
        params["weight_hh_l0"][1, 2] = np.inf
    x = f32(b, t, i) if batch_first else f32(t, b, i)
    lengths = np.array([6, 2, 0, 5, 1, 6][:b], np.int64)
    keys = tuple(params)

    def build(gb):
        ws = [gb.constant(k, params[k]) for k in keys]
        xi, li = gb.input("x", dtype="float"), gb.input("lengths", dtype="int")
        states = (None,) if mode == "gru" else (None, None)
        outs = gb.op(mode, xi, *states, li, *ws, keys=keys, batch_first=batch_first, outputs=2 if mode == "gru" else 3)
        for name, o in zip(("out", "h_n", "c_n"), outs):
            gb.output(o, name=name)

    got = run_native(build, {"x": x, "lengths": lengths})
    ref = kernels.get(mode, "reference")
    with np.errstate(invalid="ignore"):  # the infinite weight: NaN where PyTorch has NaN too
        if mode == "gru":
            out, h_n = ref(x, params, lengths=lengths, batch_first=batch_first)
            want = dict(out=out, h_n=h_n)
        else:
            out, (h_n, c_n) = ref(x, params, lengths=lengths, batch_first=batch_first)
            want = dict(out=out, h_n=h_n, c_n=c_n)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, **TOL, err_msg=name)


@pytest.mark.parametrize("m,k,n", [(1, 128, 384), (3, 37, 70), (17, 64, 130)])
@pytest.mark.parametrize("act", [None, "gelu"])
def test_linear_int8(m, k, n, act):
    quantize = kernels.get("quantize_int8", "reference")
    x, b = f32(m, k), f32(n)
    qw, ws = quantize(f32(n, k, scale=0.3))

    def build(g):
        g.output(g.op("linear_int8", g.input("x", dtype="float"), g.constant("w", qw), g.constant("s", ws),
                      g.constant("b", b), activation=act), name="y")

    ref = kernels.get("linear_int8", "reference")(x, qw, ws, b, activation=act)
    np.testing.assert_allclose(run_native(build, {"x": x})["y"], ref, rtol=1e-5, atol=1e-5)


def test_int8_model_native_equals_python(model_pairs):
    import seqjit

    _, native, python, sources = model_pairs[0]
    qn, qp = seqjit.quantize(native, "int8"), seqjit.quantize(python, "int8")
    qn.set_replay("native")
    qp.set_replay("python")
    assert [r.ids for r in qn.generate(sources, max_length=12)] == [r.ids for r in qp.generate(sources, max_length=12)]
    feeds = qn.step_feeds(qn.start([sources[0]], max_length=4), np.zeros(1, np.int64))
    native_plan = qn.executor("decoder_step").plan_for(feeds).native_replay(feeds)
    assert native_plan and all(kind == "native" for _, _, kind in native_plan.low.labels)


def test_a_large_float32_model_splits_only_into_parts_of_enough_step_rows(model_pairs, monkeypatch):
    """A float32 model of STREAMED_WEIGHT_BYTES or more splits a batch only into parts of at least
    SPLIT_MIN_STEP_ROWS step rows (sources x beams): greedy batch 16 stays one part (the team of two
    splits its products), beam 4 batch 16 splits in two; a small model, or an int8 one, keeps
    SPLIT_MIN_ROWS sources."""
    import seqjit
    from seqjit.decoding import api, strategy
    from seqjit.decoding.batch import SourceBatch
    from seqjit.decoding.inputs import parse_options

    _, native, _, _ = model_pairs[0]
    lens = np.arange(16, 0, -1)
    batch = SourceBatch(np.ones((16, 16), np.int64), lens, np.arange(16))
    before = seqjit.get_num_threads()
    try:
        seqjit.set_num_threads(2)

        def n_parts(model, **kw):
            opts = parse_options(dict(max_length=12, **kw))
            choice = strategy.choose(model, opts, rows=16)
            assert choice.path == "native", choice.why
            model.__dict__.pop("_split_streamed", None)
            return len(api._parts(model, choice, batch, opts))

        small = sum(a.nbytes for a in native.weights.values())
        assert small < api.STREAMED_WEIGHT_BYTES
        assert n_parts(native) == 2 and n_parts(native, beam_size=4) == 2
        monkeypatch.setattr(api, "STREAMED_WEIGHT_BYTES", small)  # as if it streamed from memory
        assert n_parts(native) == 1 and n_parts(native, beam_size=4) == 2
        int8 = seqjit.quantize(native, "int8")
        assert n_parts(int8) == 2
    finally:
        seqjit.set_num_threads(before)
        native.__dict__.pop("_split_streamed", None)


def test_batches_split_over_threads_equal_one_thread(model_pairs):
    """With 2 threads a batch of 24 decodes as parts on two threads; the results are the same."""
    import seqjit
    from seqjit.decoding import api, strategy
    from seqjit.decoding.batch import SourceBatch
    from seqjit.decoding.inputs import parse_options

    _, native, python, _ = model_pairs[0]
    sources = [list(rng.integers(1, 94, int(n))) + [0] for n in rng.integers(1, 15, 24)]
    before = seqjit.get_num_threads()
    try:
        seqjit.set_num_threads(2)
        batch = SourceBatch.of(native, sources)
        order = batch.by_length()
        opts = parse_options(dict(max_length=12))
        choice = strategy.choose(native, opts, rows=len(sources))
        assert choice.path == "native", choice.why
        parts = api._parts(native, choice, batch.take(order), opts)
        assert len(parts) == 2 and min(len(p) for p in parts) >= api.SPLIT_MIN_ROWS
        assert np.array_equal(np.concatenate([p.index for p in parts]), order)
        split = native.generate(sources, max_length=12, return_scores=True)
        seqjit.set_num_threads(1)
        whole = native.generate(sources, max_length=12, return_scores=True)
    finally:
        seqjit.set_num_threads(before)
    want = python.generate(sources, max_length=12, return_scores=True)
    assert [r.ids for r in split] == [r.ids for r in whole] == [r.ids for r in want]
    np.testing.assert_allclose([r.scores[0] for r in split], [r.scores[0] for r in want], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [1, 2, 3], ids=["g2p-gru", "g2p-attention", "g2p-transformer"])
def test_compacted_batches_equal_python(model_pairs, case, monkeypatch):
    """A batch of 40 whose rows end at different steps is compacted when half have ended (more
    than one native greedy call); ids and scores still equal the Python replay's."""
    import seqjit
    from seqjit.decoding import native_greedy

    _, native, python, _ = model_pairs[case]
    words = [list(rng.integers(3, native.source_vocab_size, int(n))) for n in rng.integers(1, 12, 40)]
    calls = []
    real = native_greedy._native_vm.greedy
    monkeypatch.setattr(native_greedy._native_vm, "greedy", lambda *a: calls.append(a[5].shape[0]) or real(*a))
    before = seqjit.get_num_threads()
    try:
        seqjit.set_num_threads(1)
        got = native.generate(words, max_length=30, return_scores=True)
    finally:
        seqjit.set_num_threads(before)
    want = python.generate(words, max_length=30, return_scores=True)
    assert len(calls) > 1 and calls[0] == 40 and calls[1] <= 20, calls
    assert [r.ids for r in got] == [r.ids for r in want]
    np.testing.assert_allclose([r.scores[0] for r in got], [r.scores[0] for r in want], rtol=1e-5, atol=1e-5)
