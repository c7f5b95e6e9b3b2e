"""Native sampling (``_native_vm.sample`` under ``generate``) against the Python loop: the same ids and
scores for every architecture (the loop on the Python replay) and int8 models (the loop on the same
model: an int8 Marian's two replays differ in their logits by up to 0.04 on some sources, greedy
too), in any batching; the options that keep the Python loop; the seed."""
import numpy as np
import pytest

import seqjit
from seqjit.decoding import api, greedy, native_greedy
from seqjit.graph import _native_vm
from seqjit.kernels.sampling import philox

rng = np.random.default_rng(8)

SAMPLING = [dict(sampling_topk=10), dict(sampling_topk=0, sampling_temperature=1.5),
            dict(sampling_topk=5, sampling_topp=0.7, min_length=3), dict(sampling_topk=0, sampling_topp=0.5)]


@pytest.fixture(scope="module")
def pairs(make_tiny_marian, tmp_path_factory):
    """name -> (model decoding natively, the same model replayed in Python or None (the reference loop
    runs on the native model), source token range)."""
    from seqjit.g2p import G2P

    path = tmp_path_factory.mktemp("marian")
    make_tiny_marian(seed=4).save_pretrained(path)
    out = {"marian": (seqjit.from_hf(path), seqjit.from_hf(path), 94)}
    for name in ("gru", "attention", "transformer"):
        out[f"g2p-{name}"] = (G2P(name).model, G2P(name).model, None)
    out["marian-int8"] = (seqjit.quantize(seqjit.from_hf(path), "int8"), None, 94)
    out["g2p-gru-int8"] = (seqjit.quantize(G2P("gru").model, "int8"), None, None)
    for native, python, _ in out.values():
        native.set_replay("native")
        if python is not None:
            python.set_replay("python")
    return out


def _sources(model, high, rows):
    high = high or model.source_vocab_size
    return [list(rng.integers(3, high, int(n))) for n in rng.integers(1, 10, rows)]


@pytest.fixture
def native_calls(monkeypatch):
    """The batch sizes ``_native_vm.sample`` was called with."""
    calls, real = [], _native_vm.sample

    def sample(step, writeback, logits, *args, **kw):
        calls.append(logits.shape[0])
        return real(step, writeback, logits, *args, **kw)
    monkeypatch.setattr(_native_vm, "sample", sample)
    return calls


@pytest.mark.parametrize("name", ["marian", "g2p-gru", "g2p-attention", "g2p-transformer", "marian-int8", "g2p-gru-int8"])
def test_native_sampling_equals_python_loop(pairs, name, native_calls, monkeypatch):
    """40 sources in one batch (compacted as rows finish), in batches of 7 and one by one (the runner):
    the ids of the Python loop, scores within 1e-5."""
    native, python, high = pairs[name]
    sources = _sources(native, high, 40)
    for opts in SAMPLING:
        kw = dict(seed=123, max_length=12, return_scores=True, **opts)
        native_calls.clear()
        if python is None:
            with monkeypatch.context() as m:
                m.setattr("seqjit.decoding.native_greedy.native_declines", lambda *a: "the Python loop, by the test")
                want = native.generate(sources, **kw)
            assert not native_calls
        else:
            want = python.generate(sources, **kw)
        assert len({tuple(r.ids[0]) for r in want}) > 20  # the draws differ between sources
        for batch in (64, 7, 1):
            native_calls.clear()
            got = native.generate(sources, max_batch_size=batch, **kw)
            assert native_calls, "decoded natively"
            assert [r.ids for r in got] == [r.ids for r in want], (opts, batch)
            np.testing.assert_allclose([r.scores for r in got], [r.scores for r in want], rtol=1e-5, atol=1e-5)


def test_a_source_samples_the_same_tokens_in_any_batch(pairs):
    """Draws are keyed by the source's index in the call, not its row in a batch: the Python loop, the
    native loop, batches of any size and two threads splitting a batch all give one answer."""
    native, python, high = pairs["marian"]
    sources = _sources(native, high, 33)
    opts = dict(seed=5, max_length=10, sampling_topk=4)
    want = [r.ids for r in python.generate(sources, max_batch_size=5, **opts)]
    for batch in (64, 16, 3):
        for threads in (1, 2):
            seqjit.set_num_threads(threads)
            try:
                assert [r.ids for r in native.generate(sources, max_batch_size=batch, **opts)] == want
            finally:
                seqjit.set_num_threads(1)


@pytest.mark.parametrize("extra", [dict(repetition_penalty=1.3), dict(no_repeat_ngram_size=2),
                                   dict(return_attention=True), dict(callback=lambda tok: False)])
def test_options_the_native_loop_lacks_run_the_python_loop(pairs, extra, native_calls, monkeypatch):
    """Repetition penalty, n-gram ban, attention and a callback: the Python loop, drawing from the
    same stream (the Python replay's ids)."""
    native, python, high = pairs["g2p-transformer"]
    sources = _sources(native, high, 6)
    loops = []
    real = greedy.greedy_search

    def loop(*a, **k):
        loops.append(1)
        return real(*a, **k)
    monkeypatch.setattr(api, "greedy_search", loop)
    opts = dict(seed=9, max_length=8, sampling_topk=6, **extra)
    got = native.generate(sources, **opts)
    assert loops and not native_calls
    assert [r.ids for r in got] == [r.ids for r in python.generate(sources, **opts)]


def test_no_seed_draws_one_fresh_seed_per_call(pairs, monkeypatch):
    """seed=None: one seed from the OS per generate call, shared by all its batches."""
    native, _, high = pairs["marian"]
    sources = _sources(native, high, 12)
    seeds = []

    def fresh():
        seeds.append(len(seeds) + 1000)
        return seeds[-1]
    monkeypatch.setattr(philox, "fresh_seed", fresh)
    got = native.generate(sources, max_length=8, sampling_topk=0, max_batch_size=4)
    assert seeds == [1000]
    assert [r.ids for r in got] == [r.ids for r in native.generate(sources, max_length=8, sampling_topk=0, seed=1000)]


def test_unseeded_calls_differ(pairs):
    native, _, high = pairs["marian"]
    sources = _sources(native, high, 16)
    a, b = (native.generate(sources, max_length=10, sampling_topk=0, sampling_temperature=2.0) for _ in range(2))
    assert [r.ids for r in a] != [r.ids for r in b]


@pytest.mark.parametrize("seed", [-1, 1 << 64, 2.0, True])
def test_bad_seed_is_refused(pairs, seed):
    native, _, _ = pairs["marian"]
    with pytest.raises(ValueError, match="seed"):
        native.generate([[1, 2]], sampling_topk=0, seed=seed)


def test_native_sample_checks_its_arrays():
    """What would index out of bounds in native code is refused first, naming the argument."""
    from seqjit.graph._native_vm import Program

    p, logits = Program(0), np.zeros((2, 5), np.float32)
    args = dict(prev=np.zeros(2, np.int64), stepv=np.zeros((), np.int64), ids=np.zeros((2, 3), np.int64),
                lengths=np.zeros(2, np.int64), scores=np.zeros(0), banned=np.zeros(0, np.int64), eos=0)
    rest = dict(min_length=0, start=0, nthreads=1, stop_alive=0, sources=np.arange(2, dtype=np.int64), seed=1,
                temperature=1.0, topk=0, topp=1.0)
    for name, bad in [("prev", np.zeros(3, np.int64)), ("ids", np.zeros((2, 3), np.int32)),
                      ("banned", np.array([5])), ("eos", 5), ("sources", np.arange(3, dtype=np.int64)),
                      ("lengths", np.zeros(1, np.int64)), ("scores", np.zeros(1))]:
        kw = {**args, **rest, name: bad}
        with pytest.raises(ValueError, match=name):
            _native_vm.sample(p, p, logits, kw.pop("prev"), kw.pop("stepv"), kw.pop("ids"), kw.pop("lengths"),
                              kw.pop("scores"), kw.pop("banned"), kw.pop("eos"), **kw)
