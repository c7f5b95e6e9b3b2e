"""``generate_stream`` through the native stepper against the Python loop on the Python replay: the
same tokens, log-probabilities, steps and last flags, greedy and sampled; the options that keep the
Python loop."""
import numpy as np
import pytest

from seqjit.decoding import api
from seqjit.graph import _native_vm

rng = np.random.default_rng(11)

MODES = [dict(), dict(min_length=4), dict(sampling_topk=10, seed=3), dict(sampling_topk=0, sampling_topp=0.8, seed=4),
         dict(sampling_topk=5, sampling_temperature=0.7, seed=5, min_length=2)]


@pytest.fixture
def steppers(monkeypatch):
    made, real = [], _native_vm.Stepper

    def stepper(*a, **k):
        made.append(1)
        return real(*a, **k)
    monkeypatch.setattr(_native_vm, "Stepper", stepper)
    return made


def _source(model, high):
    return list(rng.integers(3, high or model.source_vocab_size, int(rng.integers(1, 10))))


@pytest.mark.parametrize("name", ["marian", "g2p-gru", "g2p-attention", "g2p-transformer"])
def test_native_stream_equals_python_loop(pairs, name, steppers):
    native, python, high = pairs[name]
    for _ in range(3):
        src = _source(native, high)
        for opts in MODES:
            steppers.clear()
            got = list(native.generate_stream(src, max_length=12, **opts))
            assert steppers, "streamed natively"
            want = list(python.generate_stream(src, max_length=12, **opts))
            assert [(t.batch_index, t.token, t.step, t.is_last) for t in got] == \
                [(t.batch_index, t.token, t.step, t.is_last) for t in want], opts
            np.testing.assert_allclose([t.log_prob for t in got], [t.log_prob for t in want], rtol=1e-5, atol=1e-5)
            ids = [t.token for t in got]
            if ids[-1] == native.eos_id:
                ids.pop()
            assert native.generate([src], max_length=12, **opts)[0].ids[0] == ids  # the same stream as generate


def test_stream_stops_early_and_starts_again(pairs):
    """A consumer that stops after two tokens leaves nothing behind: the next stream is whole."""
    native, _, high = pairs["g2p-transformer"]
    src = _source(native, high)
    whole = [t.token for t in native.generate_stream(src, max_length=10, min_length=10)]
    gen = native.generate_stream(src, max_length=10, min_length=10)
    assert [next(gen).token, next(gen).token] == whole[:2]
    gen.close()
    assert [t.token for t in native.generate_stream(src, max_length=10, min_length=10)] == whole


@pytest.mark.parametrize("extra", [dict(repetition_penalty=1.3), dict(no_repeat_ngram_size=2), dict(return_attention=True)])
def test_options_the_stepper_lacks_stream_from_the_python_loop(pairs, extra, steppers):
    native, python, high = pairs["marian"]
    src = _source(native, high)
    opts = dict(max_length=8, sampling_topk=6, seed=2, **extra)
    got = [t.token for t in native.generate_stream(src, **opts)]
    assert not steppers
    assert got == [t.token for t in python.generate_stream(src, **opts)]


def test_a_step_plan_without_native_form_streams_from_the_python_loop(pairs, monkeypatch, steppers):
    native, python, high = pairs["g2p-gru"]
    monkeypatch.setattr(api, "native_stream", lambda *a: None)
    src = _source(native, high)
    assert [t.token for t in native.generate_stream(src, max_length=9)] == \
        [t.token for t in python.generate_stream(src, max_length=9)]
    assert not steppers


@pytest.mark.parametrize("forced", [dict(forced_bos_id=7, forced_eos_id=9), dict(forced_eos_id=0),
                                    dict(forced_bos_id=7, forced_eos_id=9, max_length=1)])
def test_forced_tokens_stream_natively(pairs, steppers, forced):
    """The stepper forces the forced-token rules as the Python loop does: the forced tokens first and
    last (log-probability 0), the same steps; a forced first token that is the end token streams from
    the Python loop."""
    native, python, high = pairs["marian"]
    source = list(rng.integers(3, high, 6))
    opts = {"max_length": 5, **forced}
    got = list(native.generate_stream(source, **opts))
    assert steppers
    want = list(python.generate_stream(source, **opts))
    assert [(t.token, t.step, t.is_last) for t in got] == [(t.token, t.step, t.is_last) for t in want]
    np.testing.assert_allclose([t.log_prob for t in got], [t.log_prob for t in want], rtol=1e-5, atol=1e-5)
    tokens = [t.token for t in got]
    if "forced_bos_id" in forced and opts["max_length"] > 1:
        assert tokens[0] == 7 and got[0].log_prob == 0.0
    assert tokens[-1] == opts["forced_eos_id"] or tokens[-1] == native.eos_id
    assert tokens == native.generate([source], **opts)[0].ids[0] + \
        ([native.eos_id] if tokens[-1] == native.eos_id else [])
    steppers.clear()
    ended = [t.token for t in native.generate_stream(source, max_length=5, forced_bos_id=native.eos_id)]
    assert not steppers and ended == [native.eos_id]
