"""Keras 3 LSTM/GRU encoder-decoders with attention, built by Keras' own code (torch backend) with
seeded random weights, saved as ``.keras`` and ``.h5``, imported with
:func:`seqjit.convert.from_keras` (h5py, nothing executed) and checked against Keras itself: the
training model's teacher-forced probabilities (``model.predict``, a padded batch with masking), and
greedy ids from a step loop written with the model's own layers (each source alone). Needs keras and
h5py: marked ``toolkit``.
"""
import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")

pytestmark = pytest.mark.toolkit

VS, VT, E, H = 17, 19, 6, 8
START, EOS, PAD = 1, 2, 0

VARIANTS = {
    # the Keras tutorials' model: LSTM, AdditiveAttention with its scale, [h; context] -> softmax
    "lstm-additive": dict(cell="LSTM", attention="additive", hidden=False, context_first=False),
    # Luong-style: dot attention with a learned scale, [context; h] -> Dense(tanh) -> softmax, dropout
    "gru-dot-scaled-tanh": dict(cell="GRU", attention="dot_scaled", hidden=True, context_first=True, dropout=True),
    # no initial state from the encoder, additive attention without scale, an unmasked embedding
    "gru-additive-noscale-zeros": dict(cell="GRU", attention="additive_noscale", hidden=True, context_first=False,
                                       initial_state=False, mask=False),
    # a bidirectional encoder whose final states, concatenated, start a decoder of 2H; plain dot attention
    "bilstm-dot-concat-states": dict(cell="LSTM", attention="dot", hidden=False, context_first=False,
                                     bidirectional="concat"),
    # directions summed (merge_mode "sum"), a decoder of H from zeros, additive attention
    "bigru-sum-additive": dict(cell="GRU", attention="additive", hidden=True, context_first=True,
                               bidirectional="sum", initial_state=False),
    # both Dense layers wrapped in TimeDistributed (a common way to write the per-step projections)
    "lstm-dot-timedistributed": dict(cell="LSTM", attention="dot", hidden=True, context_first=False,
                                     time_distributed=True),
}


def build(kind: str, seed: int = 3):
    """The Keras training model of ``VARIANTS[kind]`` and its named layers."""
    import keras
    from keras import layers

    v = {"dropout": False, "initial_state": True, "mask": True, "bidirectional": None, "time_distributed": False,
         **VARIANTS[kind]}
    keras.utils.set_random_seed(seed)
    rnn = getattr(layers, v["cell"])
    src = keras.Input((None,), dtype="int32", name="src")
    tgt = keras.Input((None,), dtype="int32", name="tgt")
    x = layers.Embedding(VS, E, mask_zero=v["mask"], name="src_emb")(src)
    Hd = H
    if v["bidirectional"]:
        encoder = layers.Bidirectional(rnn(H, return_sequences=True, return_state=True), merge_mode=v["bidirectional"],
                                       name="encoder")
        enc_out, *states = encoder(x)
        half = len(states) // 2  # [h_fwd, (c_fwd,) h_bwd, (c_bwd)]
        states = [layers.Concatenate(name=f"state{k}")([states[k], states[half + k]]) for k in range(half)]
        Hd = 2 * H if v["initial_state"] else H
    else:
        enc_out, *states = rnn(H, return_sequences=True, return_state=True, name="encoder")(x)
    y = layers.Embedding(VT, E, mask_zero=v["mask"], name="tgt_emb")(tgt)
    if v["dropout"]:
        y = layers.Dropout(0.3, name="drop")(y)
    dec_rnn = rnn(Hd, return_sequences=True, return_state=True, name="decoder")
    dec_out = dec_rnn(y, initial_state=states if v["initial_state"] else None)[0]
    if v["attention"] in ("dot", "dot_scaled"):
        att = layers.Attention(use_scale=v["attention"] == "dot_scaled", name="attention")
    else:
        att = layers.AdditiveAttention(use_scale=v["attention"] == "additive", name="attention")
    ctx = att([dec_out, enc_out])
    z = layers.Concatenate(name="concat")([ctx, dec_out] if v["context_first"] else [dec_out, ctx])
    def dense(units, activation, name):
        if v["time_distributed"]:
            return layers.TimeDistributed(layers.Dense(units, activation=activation), name=name)
        return layers.Dense(units, activation=activation, name=name)

    if v["hidden"]:
        z = dense(10, "tanh", "attentional")(z)
    out = dense(VT, "softmax", "out")(z)
    model = keras.Model([src, tgt], out)
    rng = np.random.default_rng(seed)
    for layer in model.layers:  # wider weights than Keras' initialisers: distinct greedy choices
        layer.set_weights([w * 2.0 + (rng.normal(0, 0.3, w.shape) if w.ndim else 0.5) for w in layer.get_weights()])
    return model, v


def keras_greedy(model, v, source, max_length):
    """Greedy ids for one source with the model's own layers, one step at a time (pad banned, as
    seqjit's decoding bans it; eos not included)."""
    from keras import ops

    get = model.get_layer
    enc_out, *states = get("encoder")(get("src_emb")(np.array([source])))
    if v["bidirectional"] and v["initial_state"]:
        half = len(states) // 2
        states = [get(f"state{k}")([states[k], states[half + k]]) for k in range(half)]
    if not v["initial_state"]:
        states = None
    token, ids = START, []
    for _ in range(max_length):
        out, *states = get("decoder")(get("tgt_emb")(np.array([[token]])), initial_state=states)
        ctx = get("attention")([out, enc_out])
        z = get("concat")([ctx, out] if v["context_first"] else [out, ctx])
        if v["hidden"]:
            z = get("attentional")(z)
        probs = ops.convert_to_numpy(get("out")(z))[0, -1].copy()
        probs[PAD] = -1.0
        token = int(probs.argmax())
        if token == EOS:
            break
        ids.append(token)
    return ids


def sources(n, seed=0, lo=2, hi=9):
    rng = np.random.default_rng(seed)
    return [list(map(int, rng.integers(3, VS, rng.integers(lo, hi)))) for _ in range(n)]


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
@pytest.mark.parametrize("kind", list(VARIANTS))
def test_keras_model_matches_keras(kind, suffix, tmp_path):
    from seqjit.convert import from_keras

    model, v = build(kind)
    path = tmp_path / f"model{suffix}"
    model.save(path)
    ours = from_keras(path, decoder_start_id=START, eos_id=EOS)
    srcs = sources(20)
    # teacher-forced probabilities: a padded batch (masked sources) or, unmasked, sources of one length
    batch = srcs if v["mask"] else [s[:2] for s in srcs]
    S = max(map(len, batch))
    ids = np.array([s + [PAD] * (S - len(s)) for s in batch])
    lengths = np.array([len(s) for s in batch])
    tgt = np.random.default_rng(1).integers(3, VT, (len(batch), 5))
    tgt[:, 0] = START
    want = model.predict([ids, tgt], verbose=0)
    logits = ours.logits(ids, tgt, lengths)
    got = np.exp(logits - logits.max(-1, keepdims=True))
    got /= got.sum(-1, keepdims=True)
    assert np.abs(got - want).max() <= 1e-5
    expected = [keras_greedy(model, v, s, 12) for s in srcs]
    assert [r.ids[0] for r in ours.generate(srcs, max_length=12)] == expected
    assert len({tuple(e) for e in expected}) > 5  # the check sees distinct outputs


def test_cli_converts_a_keras_file(tmp_path):
    import seqjit
    from seqjit.cli import main

    model, v = build("lstm-additive")
    model.save(tmp_path / "m.keras")
    config = f'{{"decoder_start_id": {START}, "eos_id": {EOS}}}'
    assert main(["convert", str(tmp_path / "m.keras"), str(tmp_path / "out"), "--from", "keras", "--config", config]) == 0
    loaded = seqjit.load(tmp_path / "out")
    srcs = sources(5, seed=4)
    assert [r.ids[0] for r in loaded.generate(srcs, max_length=10)] == [keras_greedy(model, v, s, 10) for s in srcs]


def test_unsupported_layers_and_missing_ids_are_named(tmp_path):
    import keras
    from keras import layers

    from seqjit.convert import from_keras
    from seqjit.errors import ConfigError, ModelFormatError

    model, _ = build("lstm-additive")
    model.save(tmp_path / "m.keras")
    with pytest.raises(ConfigError, match="decoder_start_id and eos_id"):
        from_keras(tmp_path / "m.keras")
    src = keras.Input((None,), dtype="int32")
    x = layers.Embedding(VS, E)(src)
    x = layers.LayerNormalization()(layers.LSTM(H, return_sequences=True)(x))
    keras.Model(src, layers.Dense(VT)(x)).save(tmp_path / "norm.keras")
    with pytest.raises(ModelFormatError, match=r"is a LayerNormalization, which seqjit does not import"):
        from_keras(tmp_path / "norm.keras", decoder_start_id=START, eos_id=EOS)
    # stacked encoder RNNs: the attended encoder does not read an embedding
    src, tgt = keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")
    first = layers.LSTM(H, return_sequences=True)(layers.Embedding(VS, E)(src))
    memory, h, c = layers.LSTM(H, return_sequences=True, return_state=True, name="second")(first)
    dec = layers.LSTM(H, return_sequences=True)(layers.Embedding(VT, E)(tgt), initial_state=[h, c])
    out = layers.Dense(VT)(layers.Concatenate()([dec, layers.Attention()([dec, memory])]))
    keras.Model([src, tgt], out).save(tmp_path / "stacked.keras")
    with pytest.raises(ModelFormatError, match=r"expected a Embedding layer here, got 'lstm.*' \(LSTM\)"):
        from_keras(tmp_path / "stacked.keras", decoder_start_id=START, eos_id=EOS)


def test_broken_files_are_model_format_errors(tmp_path):
    """Not a zip, a config whose tensors name no layer, a Dropout cycle, weights missing: each a
    ModelFormatError naming the file (nothing else escapes)."""
    import json
    import zipfile

    from seqjit.convert import from_keras
    from seqjit.errors import ModelFormatError

    ids = dict(decoder_start_id=START, eos_id=EOS)
    (tmp_path / "junk.keras").write_bytes(b"not a zip")
    with pytest.raises(ModelFormatError, match="junk.keras: not a readable Keras model"):
        from_keras(tmp_path / "junk.keras", **ids)
    model, _ = build("gru-dot-scaled-tanh")
    model.save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as z:
        files = {n: z.read(n) for n in z.namelist()}
    config = json.loads(files["config.json"])

    def write(name, cfg, drop=()):
        with zipfile.ZipFile(tmp_path / name, "w") as z:
            for n, raw in files.items():
                if n not in drop:
                    z.writestr(n, json.dumps(cfg) if n == "config.json" else raw)
        return tmp_path / name

    renamed = json.loads(json.dumps(config).replace('"keras_history": ["tgt_emb"', '"keras_history": ["nowhere"'))
    with pytest.raises(ModelFormatError, match="not a Keras 3 functional model's"):
        from_keras(write("renamed.keras", renamed), **ids)
    cyclic = json.loads(json.dumps(config).replace('"keras_history": ["tgt_emb"', '"keras_history": ["drop"'))
    with pytest.raises(ModelFormatError, match="form a cycle"):
        from_keras(write("cyclic.keras", cyclic), **ids)
    with pytest.raises(ModelFormatError, match="has no model.weights.h5"):
        from_keras(write("noweights.keras", config, drop=("model.weights.h5",)), **ids)
