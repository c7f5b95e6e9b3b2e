"""``generate_stream`` with a ``target_prefix``: the native stepper forces the prefix and streams what
``generate`` returns (the prefix tokens first, each with log-probability 0, an end token inside a
prefix not ending it), greedy and seeded sampling, on random tiny Marian and BART models; against the
Python loop's stream, and greedy against transformers' ``generate`` given the prefix as
``decoder_input_ids``."""
import numpy as np
import pytest

from seqjit.graph import _native_vm

from .test_target_prefix import EOS, MAX_LENGTH, PREFIXES, _hf_reference, _sources, bart, marian  # noqa: F401

MODES = [dict(), dict(min_length=5), dict(sampling_topk=0, seed=5), dict(sampling_topk=4, sampling_temperature=0.8,
                                                                         seed=2)]


@pytest.fixture
def steppers(monkeypatch):
    made, real = [], _native_vm.Stepper

    def stepper(*a, **k):
        made.append(k.get("forced", a[15] if len(a) > 15 else None))
        return real(*a, **k)
    monkeypatch.setattr(_native_vm, "Stepper", stepper)
    return made


def _model(marian, bart, family):
    return (marian[0], marian[1]) if family == "marian" else bart


def _joined(tokens, prefix, eos):
    """The streamed ids as ``generate`` returns them: the last token dropped when it is an end token
    past the prefix."""
    ids = [t.token for t in tokens]
    if len(ids) > len(prefix or []) and ids[-1] == eos:
        ids.pop()
    return ids


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("family", ["marian", "bart"])
def test_native_stream_equals_generate(marian, bart, family, options, steppers):
    """Each source streamed alone with its prefix equals the batch ``generate`` of every source with
    their prefixes (mixed lengths, none among them; sampling: ``generate`` of that source alone, whose
    draws are keyed by row 0 as the stream's): ids, and the summed log-probabilities its score."""
    _, model = _model(marian, bart, family)
    sources = _sources(len(PREFIXES), seed=4, vocab=model.source_vocab_size - 1)
    prefixes = PREFIXES + [[3] * (MAX_LENGTH - 1) + [EOS]]  # one as long as max_length, ending in the end token
    sources.append(sources[0])
    whole = model.generate(sources, target_prefix=prefixes, max_length=MAX_LENGTH, return_scores=True, **options)
    for i, (src, prefix) in enumerate(zip(sources, prefixes)):
        steppers.clear()
        got = list(model.generate_stream(src, target_prefix=[prefix], max_length=MAX_LENGTH, **options))
        assert len(steppers) == 1, "streamed natively"
        forced = [] if steppers[0] is None else steppers[0][0].tolist()
        assert forced[:len(prefix or [])] == list(prefix or [])  # BART's forced end token after it
        assert [t.token for t in got][:len(prefix or [])] == list(prefix or []), f"source {i}"
        assert [t.log_prob for t in got][:len(prefix or [])] == [0.0] * len(prefix or [])
        assert [t.step for t in got] == list(range(len(got)))
        assert [t.is_last for t in got] == [False] * (len(got) - 1) + [True]
        # sampling draws by the source's index in the call: a stream is source row 0 of generate([source])
        want = whole[i] if "seed" not in options else \
            model.generate([src], target_prefix=[prefix], max_length=MAX_LENGTH, return_scores=True, **options)[0]
        assert _joined(got, prefix, model.eos_id) == want.ids[0], f"source {i}"
        assert sum(t.log_prob for t in got) == pytest.approx(want.scores[0], abs=1e-5), f"source {i}"


@pytest.mark.parametrize("options", MODES)
def test_native_stream_equals_the_python_loop_stream(marian, options, steppers):
    """The stepper's steps (token, log-probability, step, last flag) are the Python loop's."""
    _, model, _ = marian
    sources = _sources(len(PREFIXES), seed=6, vocab=model.source_vocab_size - 1)
    for src, prefix in zip(sources, PREFIXES):
        native = list(model.generate_stream(src, target_prefix=[prefix], max_length=MAX_LENGTH, **options))
        model.set_replay("python")
        try:
            python = list(model.generate_stream(src, target_prefix=[prefix], max_length=MAX_LENGTH, **options))
        finally:
            model.set_replay(None)
        assert [(t.batch_index, t.token, t.step, t.is_last) for t in native] == \
            [(t.batch_index, t.token, t.step, t.is_last) for t in python]
        np.testing.assert_allclose([t.log_prob for t in native], [t.log_prob for t in python], rtol=1e-5, atol=1e-5)
    assert len(steppers) == len(PREFIXES)  # the Python replay streams from the Python loop


@pytest.mark.parametrize("family", ["marian", "bart"])
def test_greedy_stream_equals_transformers_with_decoder_input_ids(marian, bart, family, steppers):
    hf, model = _model(marian, bart, family)
    sources = _sources(len(PREFIXES), seed=1, vocab=model.source_vocab_size - 1)
    want = _hf_reference(hf, model, sources, PREFIXES, 1)
    assert any(len(ids) < MAX_LENGTH for ids, _ in want)
    for i, (src, prefix, (ids, score)) in enumerate(zip(sources, PREFIXES, want)):
        got = list(model.generate_stream(src, target_prefix=[prefix], max_length=MAX_LENGTH))
        assert _joined(got, prefix, model.eos_id) == ids, f"source {i}"
        assert sum(t.log_prob for t in got) == pytest.approx(score, abs=1e-4), f"source {i}"
    assert len(steppers) == len(PREFIXES)


def test_a_nan_step_at_a_prefix_token_is_refused(steppers):
    """A forced token does not hide a NaN step (the Python loop refuses it too)."""
    from seqjit.errors import NonFiniteLogits

    from .test_native_non_finite import SOURCES, _gru, _nan

    for model in _gru(**{"decoder.out.bias": _nan}):
        with pytest.raises(NonFiniteLogits, match="hold NaN"):
            list(model.generate_stream(SOURCES[0], target_prefix=[[8, 9, 10]], max_length=5))
    assert len(steppers) == 1 and steppers[0] is not None
