"""The one decoding-path chooser (seqjit.decoding.strategy.choose): which path each option set takes,
and that ``generate`` runs the path it chose (spied on the functions of each path)."""
import pytest

from seqjit.decoding import api, native_beam, native_greedy, strategy
from seqjit.decoding.inputs import parse_options, resolve_rules
from seqjit.graph import profiler

#: (options, sources, expected path, expected search); the model is the tiny native Marian
CASES = [
    (dict(), 4, "runner", "greedy"),
    (dict(), 16, "native", "greedy"),
    (dict(max_batch_size=8), 20, "native", "greedy"),
    (dict(beam_size=4), 2, "runner", "beam"),
    (dict(beam_size=4), 4, "native", "beam"),
    (dict(beam_size=4, repetition_penalty=1.2, no_repeat_ngram_size=2), 2, "runner", "beam"),
    (dict(sampling_topk=0, seed=3), 2, "runner", "sampling"),
    (dict(sampling_topk=5, sampling_temperature=0.7, seed=3), 16, "native", "sampling"),
    (dict(forced_bos_id=5), 2, "native", "greedy"),
    (dict(repetition_penalty=1.2), 2, "python", "greedy"),
    (dict(no_repeat_ngram_size=2), 2, "python", "greedy"),
    (dict(return_attention=True), 2, "python", "greedy"),
    (dict(beam_size=2, return_attention=True), 2, "python", "beam"),
    (dict(sampling_topk=0, repetition_penalty=1.1, seed=3), 2, "python", "sampling"),
    (dict(callback=lambda token: False), 2, "python", "greedy"),
]


def _choice(model, options: dict, rows: int):
    options = dict(options)
    callback, max_batch_size = options.pop("callback", None), options.pop("max_batch_size", 64)
    opts = resolve_rules(model, parse_options(options))
    return strategy.choose(model, opts, rows=rows, max_batch_size=max_batch_size, callback=callback)


@pytest.mark.parametrize("options,rows,path,search", CASES)
def test_each_option_set_takes_its_path(marian_pair, options, rows, path, search):
    _, model = marian_pair
    choice = _choice(model, options, rows)
    assert (choice.path, choice.search) == (path, search), choice.why
    assert choice.why


def test_python_replay_and_profiler_take_the_python_loop(marian_pair, make_tiny_marian, tmp_path):
    import seqjit

    _, model = marian_pair
    with profiler.profile():
        assert _choice(model, {}, 2).path == "python"
    assert _choice(model, {}, 2).path == "runner"
    make_tiny_marian(seed=4).save_pretrained(tmp_path)
    python = seqjit.from_hf(tmp_path)
    python.set_replay("python")
    choice = _choice(python, {}, 2)
    assert choice.path == "python" and "replay" in choice.why


def test_a_model_without_the_capability_flags_takes_the_python_loop(marian_pair, monkeypatch):
    _, model = marian_pair
    monkeypatch.setattr(type(model), "native_step", classmethod(lambda cls: False))
    choice = _choice(model, {}, 2)
    assert choice.path == "python" and "native_step" in choice.why
    monkeypatch.undo()
    monkeypatch.setattr(type(model), "native_decode", classmethod(lambda cls: False))
    assert _choice(model, {}, 2).path == "native"


@pytest.fixture
def spied(monkeypatch):
    """The path ``generate`` actually ran, recorded by wrappers around each path's entry function."""
    ran = []

    def spy(owner, name, path):
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            ran.append(path)
            return real(*args, **kwargs)
        monkeypatch.setattr(owner, name, wrapper)
    spy(api, "_runner_decode", "runner")
    spy(native_greedy, "native_greedy", "native")
    spy(native_beam, "native_beam", "native")
    spy(api, "greedy_search", "python")
    spy(api, "python_beam_search", "python")
    return ran


@pytest.mark.parametrize("options,rows,path,search", CASES)
def test_generate_runs_the_chosen_path(marian_pair, random_sources, spied, options, rows, path, search):
    _, model = marian_pair
    sources = random_sources(rows, seed=rows)
    model.generate(sources, max_length=8, **options)
    assert spied and set(spied) == {path}, spied


def test_the_stream_follows_the_choice(marian_pair, monkeypatch):
    _, model = marian_pair
    ran = []
    real = api.native_stream
    monkeypatch.setattr(api, "native_stream", lambda *a: ran.append("native") or real(*a))
    list(model.generate_stream([5, 6, 7], max_length=6))
    list(model.generate_stream([5, 6, 7], max_length=6, repetition_penalty=1.3))
    assert ran == ["native"]


@pytest.mark.parametrize("bad", [True, 0, -1, 2.0, "8"])
def test_batching_arguments_are_checked_as_on_the_gpu(marian_pair, bad):
    """The CPU rejects what seqjit.gpu.generate rejects (one check_batching): a bool is no batch size."""
    _, model = marian_pair
    with pytest.raises(ValueError, match="max_batch_size"):
        model.generate([[5, 6]], max_batch_size=bad)
    with pytest.raises(ValueError, match="callback"):
        model.generate([[5, 6]], beam_size=2, callback=lambda token: False)


@pytest.fixture
def id_checks(monkeypatch):
    """The id checks a call ran, by name: the decoding layer's (``pad_sources``, ``check_vocab``, which
    :class:`~seqjit.decoding.batch.SourceBatch` runs) and the model's (``check_ids``, which
    ``Seq2SeqModel.start``'s ``check_source`` runs)."""
    from seqjit.decoding import batch
    from seqjit.models import contract

    calls = []

    def spy(owner, name):
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, **k: calls.append(name) or real(*a, **k))
    spy(batch, "pad_sources")
    spy(batch, "check_vocab")
    spy(contract, "check_ids")
    return calls


@pytest.mark.parametrize("options,rows,path,search", CASES + [(dict(max_batch_size=8), 20, "native", "greedy")])
def test_the_source_ids_are_checked_once_per_call(marian_pair, random_sources, id_checks, options, rows, path, search):
    """Every path (runner, native greedy / sampling / beam, the Python loops), one batch or several."""
    _, model = marian_pair
    model.generate(random_sources(rows, seed=2), max_length=5, **options)
    assert sorted(id_checks) == ["check_vocab", "pad_sources"], id_checks


def test_the_stream_checks_the_source_ids_once(marian_pair, id_checks):
    _, model = marian_pair
    list(model.generate_stream([5, 6, 7], max_length=6))
    list(model.generate_stream([5, 6, 7], max_length=6, repetition_penalty=1.3))
    assert sorted(id_checks) == ["check_vocab", "check_vocab", "pad_sources", "pad_sources"], id_checks


def test_the_check_counter_sees_a_second_check(marian_pair, id_checks):
    """Guards the guard: ``model.start`` (the public entry) does check, and is counted."""
    _, model = marian_pair
    model.start([[5, 6, 7]], max_length=2).close()
    assert id_checks == ["check_ids"]


def test_an_empty_width_is_refused_before_decoding(marian_pair):
    import numpy as np

    _, model = marian_pair
    with pytest.raises(ValueError, match=r"sources must have shape \[B, L\] with L >= 1"):
        model.generate(np.zeros((2, 0), np.int64))
