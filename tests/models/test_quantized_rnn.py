"""int8 RNN models (issue 13): the GRU/LSTM matrices int8 per gate row beside the int8 linears.
Against the float32 model they come from (teacher-forced top-1 agreement >= 0.9 and mean |logit
error| < 5 % of the logits' spread, as for the other int8 models), against an independent NumPy
implementation of the int8 arithmetic, native replay against the Python replay, the directory
format, the load-time checks and ``seqjit inspect``."""
import json

import numpy as np
import pytest

import seqjit
from seqjit.errors import ModelFormatError
from seqjit.models import model_class
from seqjit.models.quantization import SCALE, int8_weight_names

SRC_V, TGT_V = 23, 29
CONFIGS = {  # name -> (architecture, config)
    "gru-bidirectional-linear-bridge": ("rnn_seq2seq", dict(cell="gru", bidirectional=True, bridge="linear",
                                                            bridge_activation="tanh")),
    "lstm-2-layers-bidirectional": ("rnn_seq2seq", dict(cell="lstm", num_layers=2, bidirectional=True,
                                                        bridge="concat", decoder_input_activation="relu")),
    "bahdanau-gru": ("attention_seq2seq", dict(cell="gru", bidirectional=True, bridge="concat", attention_dim=20)),
    "luong-general-lstm": ("attention_seq2seq", dict(cell="lstm", num_layers=2, attention="general",
                                                     bidirectional=True, bridge="sum", encoder_output="sum")),
}


def _random_model(arch, seed=0, **config):
    cls = model_class(arch)
    cfg = cls.config_class(src_vocab_size=SRC_V, tgt_vocab_size=TGT_V, hidden_size=24, embed_dim=16, **config)
    rng = np.random.default_rng(seed)
    weights = {n: (rng.standard_normal(s.shape) * 0.3).astype(np.float32) for n, s in cls.weight_spec(cfg).items()}
    return cls(cfg, weights)


@pytest.fixture(scope="module", params=list(CONFIGS))
def pair(request):
    arch, config = CONFIGS[request.param]
    fp32 = _random_model(arch, **config)
    return request.param, fp32, seqjit.quantize(fp32, "int8")


def _batch(seed, n=8, s=9, t=7):
    rng = np.random.default_rng(seed)
    src = rng.integers(3, SRC_V, (n, s))
    lengths = np.array([s, 1, 4, s, 7, 2, s, 5][:n])
    tgt = np.concatenate([np.full((n, 1), 1), rng.integers(3, TGT_V, (n, t - 1))], axis=1)
    return src, tgt, lengths


def test_rnn_matrices_are_int8(pair):
    name, fp32, int8 = pair
    c = fp32.config
    sides = [("encoder", c.directions), ("decoder", 1)]
    rnn = {f"{side}.rnn.weight_{m}_l{k}{sfx}" for side, dirs in sides for m in ("ih", "hh")
           for k in range(c.num_layers) for sfx in ("", "_reverse")[:dirs]}
    names = set(int8_weight_names(int8.config, int8.weights))
    assert rnn <= names
    for n in rnn:
        q, scale = int8.weights[n], int8.weights[n + SCALE]
        assert q.dtype == np.int8 and q.shape == fp32.weights[n].shape and q.shape[0] % c.gates == 0
        assert scale.dtype == np.float32 and scale.shape == (q.shape[0],)
        # symmetric per gate row: W ~= q * scale to half a step
        err = np.abs(fp32.weights[n] - q * scale[:, None])
        assert np.all(err <= 0.5 * scale[:, None] * (1 + 1e-5))
    assert int8.weights["encoder.rnn.bias_ih_l0"].dtype == np.float32
    assert int8.weights["encoder.embedding.weight"].dtype == np.float32


def test_int8_rnn_close_to_float32(pair):
    name, fp32, int8 = pair
    src, tgt, lengths = _batch(1)
    a, b = fp32.logits(src, tgt, lengths), int8.logits(src, tgt, lengths)
    err = np.abs(a - b)
    agreement = float((a.argmax(-1) == b.argmax(-1)).mean())
    print(f"\n{name} int8 vs float32, {a.shape[0] * a.shape[1]} teacher-forced positions: top-1 agreement "
          f"{agreement:.3f}, max |logit error| {err.max():.4f}, mean {err.mean():.4f} (logit std {a.std():.2f})")
    assert agreement >= 0.9
    assert err.mean() < 0.05 * a.std()


def test_full_sequence_graph_equals_stepwise(pair):
    """Per-row quantization: the input projection of a whole sequence at once is the arithmetic of one
    step at a time, so teacher forcing in one pass (``decoder_full``) equals the step graph (Bahdanau
    attention has no full-sequence graph: there ``logits`` steps too)."""
    name, _, int8 = pair
    src, tgt, lengths = _batch(2)
    np.testing.assert_allclose(int8.logits(src, tgt, lengths), int8.logits_stepwise(src, tgt, lengths),
                               rtol=1e-5, atol=1e-5)


def test_native_replay_equals_python_replay(pair):
    from seqjit.decoding.api import pad_sources

    name, fp32, _ = pair
    native, python = seqjit.quantize(fp32, "int8"), seqjit.quantize(fp32, "int8")
    native.set_replay("native")
    python.set_replay("python")
    rng = np.random.default_rng(3)
    sources = [list(rng.integers(3, SRC_V, n)) for n in (4, 11, 7, 1, 9)]
    ids, lens = pad_sources(sources, native.pad_id)
    tgt = _batch(3, n=len(sources))[1]
    np.testing.assert_allclose(native.logits_stepwise(ids, tgt, lens), python.logits_stepwise(ids, tgt, lens),
                               rtol=1e-5, atol=1e-5)
    for opts in (dict(max_length=10), dict(max_length=8, beam_size=3, num_hypotheses=2, return_scores=True)):
        got, want = native.generate(sources, **opts), python.generate(sources, **opts)
        assert [r.ids for r in got] == [r.ids for r in want], opts
        if opts.get("return_scores"):
            np.testing.assert_allclose([s for r in got for s in r.scores], [s for r in want for s in r.scores],
                                       rtol=1e-5, atol=1e-5)
    state = native.start([sources[1]], max_length=4)
    feeds = native.step_feeds(state, np.zeros(1, np.int64))
    step = native.executor("decoder_step").plan_for(feeds).native_replay(feeds)
    assert step and all(kind == "native" for _, _, kind in step.low.labels), step.low.labels
    enc_feeds = {"src_ids": ids, "src_lengths": lens}
    encoder = native.executor("encoder").plan_for(enc_feeds).native_replay(enc_feeds)
    assert encoder and all(kind == "native" for _, op, kind in encoder.low.labels if "recurrence" in op)


# -- the int8 arithmetic written out in NumPy (rnn_seq2seq: encoder, bridge, decoder, output) --------
def _q_linear(x, q, s, b):
    """kernels/linear_int8: x rows quantized in float32, int64 products, dequantized in float64."""
    x2 = x.reshape(-1, x.shape[-1]).astype(np.float32)
    amax = np.abs(x2).max(axis=1)
    inv = np.float32(127) / np.where(amax > 0, amax, np.float32(1))
    qx = np.clip(np.rint(x2 * np.where(amax > 0, inv, 0)[:, None]), -127, 127).astype(np.int64)
    scales = ((amax / np.float32(127)).astype(np.float32)[:, None] * s).astype(np.float64)
    y = (qx @ q.astype(np.int64).T).astype(np.float32).astype(np.float64) * scales + b
    return y.astype(np.float32).reshape(*x.shape[:-1], -1)


def _sig(v):
    return 1 / (1 + np.exp(-v.astype(np.float64)))


def _cell(kind, xg, hg, h, c):
    H = h.shape[-1]
    if kind == "gru":
        r, z = _sig(xg[:H] + hg[:H]), _sig(xg[H:2 * H] + hg[H:2 * H])
        n = np.tanh(xg[2 * H:] + r * hg[2 * H:])
        return ((1 - z) * n + z * h).astype(np.float32), c
    i, f, g, o = _sig(xg[:H] + hg[:H]), _sig(xg[H:2 * H] + hg[H:2 * H]), np.tanh(xg[2 * H:3 * H] + hg[2 * H:3 * H]), \
        _sig(xg[3 * H:] + hg[3 * H:])
    c = (f * c + i * g).astype(np.float32)
    return (o * np.tanh(c)).astype(np.float32), c


def _direction(w, kind, prefix, sfx, x, h, c, reverse):
    """One row's layer and direction over x [T, I]: (out [T, H], h, c)."""
    get = lambda n: w[f"{prefix}.{n}{sfx}"]  # noqa: E731
    xg = _q_linear(x, get("weight_ih"), w[f"{prefix}.weight_ih{sfx}{SCALE}"], get("bias_ih"))
    out = np.zeros((len(x), h.shape[-1]), np.float32)
    for t in (reversed(range(len(x))) if reverse else range(len(x))):
        hg = _q_linear(h, get("weight_hh"), w[f"{prefix}.weight_hh{sfx}{SCALE}"], get("bias_hh"))
        h, c = _cell(kind, xg[t], hg, h, c)
        out[t] = h
    return out, h, c


def _numpy_rnn_seq2seq_logits(model, src, tgt, lengths):
    c, w = model.config, model.weights
    H, D, L = c.hidden_size, c.directions, c.num_layers
    logits = []
    for row, n in zip(src, lengths):
        x = w["encoder.embedding.weight"][row[:n]]
        finals = []
        for k in range(L):
            outs = []
            for d in range(D):
                sfx = f"_l{k}" + ("_reverse" if d else "")
                zero = np.zeros(H, np.float32)
                out, h, cc = _direction(w, c.cell, "encoder.rnn", sfx, x, zero, zero, d == 1)
                outs.append(out)
                finals.append((h, cc))
            x = np.concatenate(outs, axis=-1)
        state = []
        for k in range(L):
            (hf, cf), (hb, cb) = finals[2 * k], finals[2 * k + 1]
            if c.bridge == "concat":
                state.append((np.concatenate([hf, hb]), np.concatenate([cf, cb])))
            else:
                act = np.tanh if c.bridge_activation == "tanh" else (lambda v: v)
                bridge = lambda name, a, b: act(_q_linear(np.concatenate([a, b]), w[f"{name}.weight"],  # noqa: E731
                                                          w[f"{name}.weight{SCALE}"], w[f"{name}.bias"]))
                state.append((bridge("bridge", hf, hb), bridge("bridge_c", cf, cb) if c.cell == "lstm" else cf))
        e = w["decoder.embedding.weight"][tgt_row := tgt[len(logits)]]
        x = np.maximum(e, 0) if c.decoder_input_activation == "relu" else e
        for k in range(L):
            x, _, _ = _direction(w, c.cell, "decoder.rnn", f"_l{k}", x, *state[k], False)
        logits.append(_q_linear(x, w["decoder.out.weight"], w[f"decoder.out.weight{SCALE}"], w["decoder.out.bias"]))
        assert len(tgt_row) == len(x)
    return np.stack(logits)


@pytest.mark.parametrize("name", [n for n in CONFIGS if CONFIGS[n][0] == "rnn_seq2seq"])
def test_int8_rnn_seq2seq_equals_numpy_int8_arithmetic(name):
    """Teacher-forced logits of the int8 model (Cython kernels, Python replay; and native) against the
    NumPy implementation above (float64 gates: the models' float32 gates differ from it by ulps, and
    an int8 rounding of a state row may move one step, so 1e-4 of the logits' spread)."""
    arch, config = CONFIGS[name]
    int8 = seqjit.quantize(_random_model(arch, seed=4, **config), "int8")
    src, tgt, lengths = _batch(5)
    want = _numpy_rnn_seq2seq_logits(int8, src, tgt, lengths)
    for replay in ("python", "native"):
        int8.set_replay(replay)
        for got in (int8.logits(src, tgt, lengths), int8.logits_stepwise(src, tgt, lengths)):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * want.std())


# -- the directory format --------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    arch, config = CONFIGS["lstm-2-layers-bidirectional"]
    fp32 = _random_model(arch, **config)
    int8 = seqjit.quantize(fp32, "int8")
    int8.save(tmp_path / "int8")
    fp32.save(tmp_path / "fp32")
    return tmp_path, fp32, int8


def test_int8_rnn_model_directory_round_trip(saved):
    path, fp32, int8 = saved
    assert json.loads((path / "int8" / "config.json").read_text())["quantization"] == "int8"
    loaded = seqjit.load(path / "int8")
    for name, value in int8.weights.items():
        assert loaded.weights[name].dtype == value.dtype
        np.testing.assert_array_equal(loaded.weights[name], value)
    src, tgt, lengths = _batch(6)
    np.testing.assert_array_equal(loaded.logits(src, tgt, lengths), int8.logits(src, tgt, lengths))
    size = (path / "int8" / "model.safetensors").stat().st_size / (path / "fp32" / "model.safetensors").stat().st_size
    print(f"\nint8 LSTM seq2seq model.safetensors: {size:.0%} of float32 (float32 embeddings and biases)")
    assert size < 0.5


def test_bad_rnn_scales_and_dtypes_refused_at_load(saved):
    from seqjit.models.weights_file import read_safetensors, write_safetensors

    path, _, _ = saved
    file = path / "int8" / "model.safetensors"
    weights, _ = read_safetensors(file)
    weights["encoder.rnn.weight_hh_l1_reverse.scale"] = weights["encoder.rnn.weight_hh_l1_reverse.scale"][:-1]
    weights["decoder.rnn.weight_ih_l0"] = weights["decoder.rnn.weight_ih_l0"].astype(np.float32)
    del weights["decoder.rnn.weight_hh_l1.scale"]
    write_safetensors(file, weights, {"format": "seqjit"})
    with pytest.raises(ModelFormatError) as info:
        seqjit.load(path / "int8")
    message = str(info.value)
    assert "decoder.rnn.weight_hh_l1.scale" in message
    assert "encoder.rnn.weight_hh_l1_reverse.scale has shape [95], expected [96]" in message
    assert "decoder.rnn.weight_ih_l0 has dtype float32, expected int8" in message


def test_inspect_shows_int8_rnn_matrices(saved):
    from seqjit.cli import main
    from seqjit.commands.inspect import describe, format_text

    path, _, int8 = saved
    info = describe(seqjit.load(path / "int8"))
    names = int8_weight_names(int8.config, int8.weights)
    assert info["weights"]["dtypes"]["int8"]["parameters"] == sum(int8.weights[n].size for n in names)
    assert info["graphs"]["encoder"]["lstm_recurrence_int8"] == 4  # 2 layers x 2 directions
    step = info["graphs"]["decoder_step"]
    assert step["lstm_recurrence_int8"] == 2 and "lstm_cell" not in step
    # the first cell's input (relu of the embedding) gathers projected rows: linear_int8 for layer 1 and out
    assert step["linear_int8"] == 2 and info["graphs"]["encoder"]["linear_int8"] == 1
    text = format_text(info)
    assert "quantization: int8" in text and "lstm_recurrence_int8 x 4" in text
    assert main(["inspect", str(path / "int8")]) == 0
