"""Native beam search (seqjit.decoding.native_beam) against the reference loop (decoding/beam.py).

Both searches run on the same model with the same native step program, so any difference comes from
the search: the log-softmax, the score processors, the top-2K, the bookkeeping and the state
reorder. The reference itself is checked against transformers and PyTorch in
test_generate_marian.py and test_generate_rnn.py. Ids must be identical and scores equal within
1e-5 (relative: a score is a sum of up to max_length log-probabilities).
"""
import numpy as np
import pytest
import torch

import seqjit
from seqjit.convert import from_torch
from seqjit.decoding import native_beam
from seqjit.decoding.inputs import pad_sources, suppressed_tokens
from seqjit.decoding.beam import beam_search
from seqjit.decoding.options import DecodingOptions

nn = torch.nn
VS, VT, PAD, SOS, EOS = 23, 29, 0, 1, 2


def _rnn_model(attend: bool, cell: str = "gru", seed: int = 0):
    """A seeded GRU/LSTM encoder-decoder (Luong dot attention with ``attend``), large weights; the
    end token's output bias raised so that hypotheses end at many different steps."""
    torch.manual_seed(seed)
    hidden = 16
    rnn = nn.GRU if cell == "gru" else nn.LSTM
    root = nn.Module()
    root.encoder = nn.ModuleDict(dict(embedding=nn.Embedding(VS, hidden), **{cell: rnn(hidden, hidden, batch_first=True)}))
    dec = dict(embedding=nn.Embedding(VT, hidden), out=nn.Linear(hidden, VT), **{cell: rnn(hidden, hidden, batch_first=True)})
    if attend:
        dec["concat"] = nn.Linear(2 * hidden, hidden)
    root.decoder = nn.ModuleDict(dec)
    with torch.no_grad():
        for p in root.parameters():
            p.normal_(0, 0.5)
        root.decoder.out.bias[EOS] += 3.0
    weights = {k: v.numpy() for k, v in root.state_dict().items()}
    arch, extra = ("attention_seq2seq", dict(attention="dot")) if attend else ("rnn_seq2seq", {})
    return from_torch(weights, arch=arch, pad_id=PAD, decoder_start_id=SOS, eos_id=EOS, **extra)


@pytest.fixture(scope="module")
def models(tmp_path_factory, make_tiny_marian):
    path = tmp_path_factory.mktemp("marian_beam")
    make_tiny_marian(seed=2).save_pretrained(path, safe_serialization=True)
    marian = seqjit.convert.from_hf(path)
    built = {"transformer": marian, "gru": _rnn_model(False), "bahdanau_dot": _rnn_model(True, seed=1),
             "lstm": _rnn_model(False, "lstm", seed=3)}
    built["transformer_int8"] = seqjit.quantize(marian, "int8")
    built["gru_int8"] = seqjit.quantize(built["gru"], "int8")
    return built


def _sources(model, n, seed):
    rng = np.random.default_rng(seed)
    high = (model.source_vocab_size or VS) - 1
    return [rng.integers(3, high, int(k)).tolist() for k in rng.integers(1, 12, n)]


def _both(model, sources, **kw):
    """(native results, reference results) for one batch of ``sources``."""
    opts = DecodingOptions(**{"max_length": 24, **kw}).validate()
    ids, lens = pad_sources(sources, model.pad_id)
    suppressed = suppressed_tokens(model, opts)
    out = []
    for search in (native_beam.native_beam, lambda m, s, o, sup: beam_search(m, s, o, suppressed=sup)):
        state = model.start(ids, lens, max_length=opts.max_length)
        try:
            out.append(search(model, state, opts, suppressed))
        finally:
            state.close()
    assert out[0] is not None, "the step plan did not lower: nothing native was tested"
    return out


def _assert_same(native, reference):
    assert len(native) == len(reference)
    for i, (a, b) in enumerate(zip(native, reference)):
        assert a.ids == b.ids, f"source {i}: {a.ids} != {b.ids}"
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-6, err_msg=f"source {i}")


OPTIONS = [
    dict(beam_size=2),
    dict(beam_size=4, num_hypotheses=4),
    dict(beam_size=8, num_hypotheses=3, length_penalty=0.6),
    dict(beam_size=4, min_length=6, length_penalty=1.4),
    dict(beam_size=4, repetition_penalty=1.5, num_hypotheses=2),
    dict(beam_size=4, no_repeat_ngram_size=2, num_hypotheses=2),
    dict(beam_size=3, no_repeat_ngram_size=1, max_length=9),
    dict(beam_size=4, max_length=5, num_hypotheses=4),
    dict(beam_size=3, forced_bos_id=7, forced_eos_id=3, max_length=8, num_hypotheses=2),
]


@pytest.mark.parametrize("name", ["transformer", "gru", "bahdanau_dot", "lstm", "transformer_int8", "gru_int8"])
@pytest.mark.parametrize("kw", OPTIONS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_native_beam_equals_reference(models, name, kw):
    model = models[name]
    _assert_same(*_both(model, _sources(model, 6, seed=len(kw)), **kw))


@pytest.mark.parametrize("name", ["gru", "bahdanau_dot"])
def test_compacted_batches_equal_reference(models, name, monkeypatch):
    """A batch of 24 sources x 4 beams whose sources stop at different steps: frozen in the native
    loop, then the batch is compacted (the loop returns and is called again on fewer rows)."""
    model = models[name]
    calls = []
    real = native_beam._native_vm.beam
    monkeypatch.setattr(native_beam._native_vm, "beam", lambda *a: calls.append(a[8].shape[0]) or real(*a))
    native, reference = _both(model, _sources(model, 24, seed=7), beam_size=4, num_hypotheses=2, max_length=30)
    _assert_same(native, reference)
    assert len({len(r.ids[0]) for r in reference}) > 3, "sources should stop at different steps"
    assert len(calls) > 1 and calls[-1] < 24, f"the batch was never compacted: {calls}, {sorted(len(r.ids[0]) for r in reference)}"


def test_generate_uses_the_native_loop(models, monkeypatch):
    """generate routes beam search through native_beam (and its results are the reference's)."""
    model = models["transformer"]
    sources = _sources(model, 5, seed=11)
    calls = []
    real = native_beam.native_beam
    monkeypatch.setattr(native_beam, "native_beam", lambda *a: calls.append(1) or real(*a))
    got = model.generate(sources, beam_size=4, return_scores=True, num_hypotheses=2, max_length=40)
    assert calls, "generate did not run the native beam search"
    _assert_same(got, _both(model, sources, beam_size=4, num_hypotheses=2, max_length=40)[1])


def test_return_attention_falls_back_to_the_reference(models, monkeypatch):
    """Beam search with attention output runs the reference loop (documented in native_beam)."""
    model = models["bahdanau_dot"]

    def fail(*a):
        raise AssertionError("native beam search ran with return_attention")

    monkeypatch.setattr(native_beam, "native_beam", fail)
    res = model.generate(_sources(model, 3, seed=5), beam_size=3, return_attention=True)
    assert all(r.attention is not None for r in res)


@pytest.mark.parametrize("name", ["transformer", "bahdanau_dot", "lstm", "gru_int8"])
def test_small_batches_through_runners_equal_reference(models, name, monkeypatch):
    """Batches of 1-3 sources at beam 4 run on a BeamRunner (set-up made once per shape, reused:
    the runner's state is reset between decodes); results equal the reference loop's."""
    from seqjit.decoding import beam_runner

    model = models[name]
    made = []
    real = beam_runner.BeamRunner.__init__
    monkeypatch.setattr(beam_runner.BeamRunner, "__init__", lambda self, *a: made.append(a[1:]) or real(self, *a))
    for n, seed in ((1, 1), (3, 2), (1, 3), (3, 4)):
        sources = _sources(model, n, seed)
        sources[0] = (sources[0] * 12)[:12]  # the padded width: 12, so each shape comes twice
        got = model.generate(sources, beam_size=4, num_hypotheses=2, return_scores=True, max_length=20)
        _assert_same(got, _both(model, sources, beam_size=4, num_hypotheses=2, max_length=20)[1])
    assert made, "no BeamRunner was made"
    assert len(made) == 2, f"runners were not reused: {made}"
