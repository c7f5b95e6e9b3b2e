"""``attention_seq2seq`` variants (bridges, decoder sizes, attention after the step, input feeding,
attentional layer, MLP and maxout output layers) against the plain-PyTorch reference of
``rnn_variant_reference`` with the same seeded weights.

The reference runs each source alone (no padding, no masks); seqjit runs the padded batch, so a
mean that counted padded positions, or a missing input feed, shows as a mismatch. Every variant is
checked for teacher-forced logits (one pass or stepwise), each step's attention and greedy ids,
under the Python (reference) replay and under the native one, whose encoder and step graphs must
lower in full. Two tests show the checks bite: the reference with one rule broken (unmasked mean;
no input feeding) is far from seqjit.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

import seqjit
from seqjit.convert import from_torch
from seqjit.errors import ConfigError


def _reference_module():
    """``rnn_variant_reference`` beside this file (the suite imports tests with importlib, not as a package)."""
    spec = importlib.util.spec_from_file_location("rnn_variant_reference", Path(__file__).with_name("rnn_variant_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VariantSeq2Seq = _reference_module().VariantSeq2Seq

TOL = 1e-4
B, S, T, VS, VT = 3, 6, 5, 11, 13
LENGTHS = [6, 2, 4]
PAD, START, EOS = 0, 1, 2

VARIANTS = {
    # bridges (Nematus mean, JoeyNMT bridge / last / zeros), decoder sizes unlike the encoder's
    "mean-gru-bi-wide": dict(bridge="mean", dec_hidden=9, dec_layers=2, score="bahdanau", attn_dim=4),
    "mean-lstm-uni-notanh-cellzeros": dict(cell="lstm", bidirectional=False, bridge="mean", bridge_tanh=False,
                                           bridge_cell="zeros", score="general", dec_hidden=7),
    "top_linear-lstm-2-to-1": dict(cell="lstm", layers=2, dec_layers=1, bridge="top_linear", score="bahdanau",
                                   feeding=True, hidden_first=True),
    "last-lstm-bi-joeynmt": dict(cell="lstm", layers=2, bridge="last", score="general", feeding=True,
                                 hidden_first=True),
    "zeros-gru": dict(bridge="zeros", score="dot", dec_hidden=12),
    # attentional layer and input feeding (OpenNMT-py / JoeyNMT)
    "feeding-dot-narrow": dict(bridge="top_linear", score="dot", dec_hidden=12, feeding=True, att_dim=5),
    "feeding-bahdanau-notanh-nobias": dict(bridge="mean", score="bahdanau", feeding=True, att_tanh=False,
                                           concat_bias=False, dec_layers=2),
    "general-narrow-no-feeding": dict(bridge="top_linear", score="general", att_dim=4),
    # output layers
    "mlp-relu": dict(bridge="mean", score="general", feeding=True, output="mlp", out_hidden=8, out_act="relu"),
    "mlp-leaky-relu": dict(bridge="mean", score="bahdanau", query="previous", deep=True, output="mlp", out_hidden=8,
                           out_act="leaky_relu", slope=0.3),
    "mlp-tanh-onepass": dict(cell="lstm", bridge="top_linear", score="dot", dec_hidden=12, output="mlp",
                             out_hidden=7),
    "maxout": dict(bridge="mean", score="bahdanau", feeding=True, output="maxout", out_hidden=6),
    # Bahdanau et al. 2015 / Nematus: attention on the previous state, deep output (maxout or tanh MLP)
    "previous-deep-maxout": dict(bridge="mean", score="bahdanau", query="previous", deep=True, output="maxout",
                                 out_hidden=6, attn_dim=5),
    "previous-deep-lstm-2-sum": dict(cell="lstm", bridge="top_linear", score="bahdanau", query="previous", deep=True,
                                     output="mlp", out_hidden=7, dec_layers=2, query_layers="sum"),
    # Luong et al. 2015 concat score, the query from every decoder layer
    "concat-feeding": dict(bridge="mean", score="concat", feeding=True, attn_dim=4),
    "concat-previous-2-concat": dict(bridge="mean", score="concat", query="previous", dec_layers=2,
                                     query_layers="concat"),
    "general-2-concat-deep": dict(cell="lstm", bridge="top_linear", score="general", dec_layers=2,
                                  query_layers="concat", deep=True),
    "bahdanau-feeding-2-sum": dict(bridge="mean", score="bahdanau", feeding=True, dec_layers=2, query_layers="sum"),
    "general-deep-onepass": dict(bridge="top_linear", score="general", deep=True, output="mlp", out_hidden=7),
}


def keywords(kw: dict) -> dict:
    """What ``from_torch`` needs besides the weights: the bridge and the choices weights cannot show."""
    out = dict(bridge=kw.get("bridge", "mean"), pad_id=PAD, decoder_start_id=START, eos_id=EOS)
    if out["bridge"] != "zeros":
        if kw.get("bridge") != "last":
            out["bridge_activation"] = "tanh" if kw.get("bridge_tanh", True) else None
        if kw.get("cell") == "lstm":
            out["bridge_cell"] = kw.get("bridge_cell", "hidden")
    if kw.get("hidden_first"):
        out["concat_order"] = "hidden_first"
    if kw.get("att_tanh") is False:
        out["attentional_activation"] = None
    if kw.get("output") == "mlp":
        out["output_activation"] = kw.get("out_act", "tanh")
        if "slope" in kw:
            out["output_negative_slope"] = kw["slope"]
    if kw.get("deep"):
        out["deep_output"] = True
    if kw.get("query_layers", "top") != "top":
        out["attention_query_layers"] = kw["query_layers"]
    return out


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VS, (B, S), generator=g)
    for b, n in enumerate(LENGTHS):
        src[b, n:] = PAD
    tgt = torch.randint(3, VT, (B, T), generator=g)
    tgt[:, 0] = START
    return src, torch.tensor(LENGTHS), tgt


def build(name, seed=7):
    kw = VARIANTS[name]
    torch.manual_seed(seed)
    ref = VariantSeq2Seq(VS, VT, **kw).eval()
    with torch.no_grad():  # wider weights than the default init: distinct greedy choices
        for p in ref.parameters():
            p.mul_(2.0)
    model = from_torch(ref.state_dict(), arch="attention_seq2seq", **keywords(kw))
    return ref, model


def max_err(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


def assert_native(model, src, lengths):
    """The encoder and step graphs of ``model`` lower to the native replay, every node native."""
    model.set_replay("native")
    ex = model.executor("encoder")
    feeds = {"src_ids": src, "src_lengths": lengths}
    plan = ex.lease(feeds)
    try:
        plan.run(feeds)  # lowered at its first run
        assert plan.native, "the encoder did not lower to the native replay"
        assert all(kind == "native" for _, _, kind in plan.native.low.labels), plan.native.low.labels
    finally:
        ex.release(plan)
    state = model.start(src, lengths, max_length=2)
    try:
        model.step(state, np.full(len(lengths), START))
        plan = state.leases["decoder_step"][1]
        assert plan.native, "the decoder step did not lower to the native replay"
        assert all(kind == "native" for _, _, kind in plan.native.low.labels), plan.native.low.labels
    finally:
        state.close()


@pytest.mark.parametrize("replay", ["python", "native"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_matches_pytorch(name, replay):
    ref, model = build(name)
    model.set_replay(replay)
    src, lengths, tgt = batch()
    ids, lens, tgt_in = src.numpy(), lengths.numpy(), tgt.numpy()
    expected = [ref.teacher_forced(src[b:b + 1, :n], tgt[b:b + 1]) for b, n in enumerate(LENGTHS)]
    full, stepwise = model.logits(ids, tgt_in, lens), model.logits_stepwise(ids, tgt_in, lens)
    state = model.start(ids, lens, max_length=T)
    for t in range(T):
        logits, weights = model.step(state, tgt_in[:, t], with_attention=True)
        for b, n in enumerate(LENGTHS):
            assert max_err(logits[b], expected[b][0][t]) <= TOL, (b, t)
            assert max_err(weights[b, :n], expected[b][1][t]) <= TOL, (b, t)
            assert not weights[b, n:].any()
    state.close()
    for b in range(B):
        assert max_err(full[b], expected[b][0]) <= TOL
        assert max_err(stepwise[b], expected[b][0]) <= TOL
    sources = [list(map(int, src[b, :n])) for b, n in enumerate(LENGTHS)]
    for opts in (dict(max_length=8), dict(max_length=8, min_length=8)):  # the second: 8 steps whatever eos scores
        want = [ref.greedy(torch.tensor([s]), START, EOS, {PAD}, **opts) for s in sources]
        assert [r.ids[0] for r in model.generate(sources, **opts)] == want, opts
    if replay == "native":
        assert_native(model, ids, lens)


def test_one_pass_teacher_forcing_where_no_step_depends_on_the_last():
    assert build("mlp-tanh-onepass")[1].has_full_decoder()
    assert build("general-deep-onepass")[1].has_full_decoder()
    for name in ("feeding-dot-narrow", "zeros-gru", "mean-gru-bi-wide", "mean-lstm-uni-notanh-cellzeros",
                 "general-2-concat-deep", "concat-feeding"):
        assert not build(name)[1].has_full_decoder(), name


def test_save_load_round_trip(tmp_path):
    _, model = build("maxout")
    model = type(model)(model.config.replace(suppress_tokens=[3], suppress_pad_token=False), model.weights)
    src, lengths, tgt = batch()
    model.save(tmp_path / "m")
    loaded = seqjit.load(tmp_path / "m")
    assert loaded.config == model.config
    np.testing.assert_array_equal(loaded.logits(src.numpy(), tgt.numpy(), lengths.numpy()),
                                  model.logits(src.numpy(), tgt.numpy(), lengths.numpy()))


# -- the checks bite: one rule broken in the reference is far from seqjit ---------------------------
def test_padded_positions_out_of_the_mean():
    ref, model = build("mean-gru-bi-wide")
    src, lengths, tgt = batch()
    got = model.logits(src.numpy(), tgt.numpy(), lengths.numpy())
    b = 1  # 2 tokens and 4 pads: the reference over the padded row counts the pads in its mean
    with torch.no_grad():
        memory, state = ref.encoder.rnn(ref.encoder.embedding(src[b:b + 1]))
        memory = memory[:, :LENGTHS[b]] * 0 + memory.mean(dim=1, keepdim=True)  # every position the unmasked mean
        state = ref.initial_state(memory, state)
        memory = ref.encoder.rnn(ref.encoder.embedding(src[b:b + 1, :LENGTHS[b]]))[0]
        feed, rows = memory.new_zeros(1, 1, ref.Ao), []
        for t in range(T):
            y, _, state, feed = ref.step(tgt[b:b + 1, t:t + 1], memory, state, feed)
            rows.append(y.numpy())
    assert max_err(got[b], np.stack(rows)) > 1e-2
    assert max_err(got[b], ref.teacher_forced(src[b:b + 1, :LENGTHS[b]], tgt[b:b + 1])[0]) <= TOL


def test_input_feeding_changes_the_logits():
    ref, model = build("feeding-dot-narrow")
    src, lengths, tgt = batch()
    got = model.logits(src.numpy(), tgt.numpy(), lengths.numpy())
    n = LENGTHS[0]
    with torch.no_grad():
        memory, state, feed = ref.start(src[:1, :n])
        rows = []
        for t in range(T):
            y, _, state, _ = ref.step(tgt[:1, t:t + 1], memory, state, feed)  # feed stays zero
            rows.append(y.numpy())
    assert max_err(got[0, 1:], np.stack(rows)[1:]) > 1e-2


# -- options seqjit refuses, by name ------------------------------------------------------------------
BASE = dict(src_vocab_size=VS, tgt_vocab_size=VT, hidden_size=6)


@pytest.mark.parametrize("changes,match", [
    (dict(bridge="sum", decoder_layers=2), r"decoder_layers \(2\) must equal num_layers \(1\)"),
    (dict(bridge="sum", decoder_hidden_size=9), r"decoder_hidden_size 9"),
    (dict(bridge="last", decoder_hidden_size=9), r"bridge 'last'.*decoder_hidden_size must be 6"),
    (dict(bridge="mean", bridge_cell="zeros"), r"bridge_cell sets an LSTM's initial cell state"),
    (dict(bridge="mean", bridge_activation="gelu"), r"'bridge_activation' must be one of"),
    (dict(bridge="nematus"), r"'bridge' must be one of \['sum', 'concat', 'linear', 'layer_mix', 'stack', 'mean', 'top_linear'"),
    (dict(attention="dot", attention_query="previous"), r"attention_query 'previous'.*bahdanau.*only"),
    (dict(input_feeding=True), r"input_feeding applies to attention_query 'current'"),
    (dict(output_layer="mlp"), r"output_layer 'mlp' needs output_hidden_dim"),
    (dict(output_layer="mlp", output_hidden_dim=4, output_activation="swish"), r"'output_activation' must be one of"),
    (dict(output_layer="mlp", output_hidden_dim=4, output_activation="leaky_relu", output_negative_slope=1.5),
     r"'output_negative_slope' must be in \[0, 1\)"),
    (dict(output_layer="maxout", output_hidden_dim=4, quantization="int8"), r"output_layer 'maxout' has no quantized form"),
    (dict(output_hidden_dim=4), r"output_hidden_dim applies to output_layer 'mlp' or 'maxout'"),
    (dict(attention="dot", decoder_layers=2, bridge="mean", attention_query_layers="concat"),
     r"dot attention needs the memory size \(6\) to equal the query size \(12"),
    (dict(suppress_tokens=[3, 13]), r"'suppress_tokens' must be a list of token ids in \[0, 13\)"),
    (dict(suppress_tokens=2), r"'suppress_tokens' must be a list of token ids"),
    (dict(attention_query_layers="mean"), r"'attention_query_layers' must be one of \['top', 'sum', 'concat'\]"),
])
def test_config_errors_name_the_option(changes, match):
    from seqjit.models.attention_seq2seq import AttentionSeq2SeqConfig

    with pytest.raises(ConfigError, match=match):
        AttentionSeq2SeqConfig.from_dict({**BASE, **changes})


@pytest.mark.parametrize("name", ["mean-gru-bi-wide", "top_linear-lstm-2-to-1", "feeding-dot-narrow", "mlp-relu",
                                  "mlp-tanh-onepass", "concat-feeding", "previous-deep-lstm-2-sum", "mlp-leaky-relu",
                                  "general-2-concat-deep"])
def test_int8_variant(name):
    """int8 (``seqjit.quantize``) of a variant: close to float32 (the criteria of
    ``test_quantized_rnn``), the native replay equal to the Python one, beam search included."""
    _, fp32 = build(name)
    src, lengths, tgt = batch()
    ids, lens, tgt = src.numpy(), lengths.numpy(), tgt.numpy()
    native, python = seqjit.quantize(fp32, "int8"), seqjit.quantize(fp32, "int8")
    native.set_replay("native")
    python.set_replay("python")
    a, b = fp32.logits(ids, tgt, lens), python.logits(ids, tgt, lens)
    assert float((a.argmax(-1) == b.argmax(-1)).mean()) >= 0.9
    assert np.abs(a - b).mean() < 0.05 * a.std()
    np.testing.assert_allclose(native.logits_stepwise(ids, tgt, lens), python.logits_stepwise(ids, tgt, lens),
                               rtol=1e-5, atol=1e-5)
    sources = [list(map(int, src[b, :n])) for b, n in enumerate(LENGTHS)]
    for opts in (dict(max_length=8), dict(max_length=8, beam_size=3, num_hypotheses=2)):
        assert [r.ids for r in native.generate(sources, **opts)] == [r.ids for r in python.generate(sources, **opts)]
