"""GreedyRunner (small batches decoded with their set-up made once) against the Python replay."""
import threading

import numpy as np
import pytest

from seqjit.decoding import greedy_runner, runner_pool

rng = np.random.default_rng(5)


def _sources(model, high, rows, width):
    high = high or model.source_vocab_size
    lengths = [width] + list(rng.integers(1, width + 1, rows - 1))
    return [list(rng.integers(3, high, int(n))) for n in lengths]


def _runners_made(monkeypatch):
    made = []
    real = greedy_runner.GreedyRunner.__init__

    def init(self, *a, **k):
        made.append(a[1:])
        real(self, *a, **k)
    monkeypatch.setattr(greedy_runner.GreedyRunner, "__init__", init)
    return made


@pytest.mark.parametrize("name", ["marian", "g2p-gru", "g2p-attention", "g2p-transformer"])
def test_runner_equals_python_replay(pairs, name, monkeypatch):
    """Batches of 1-15 rows, shapes repeated with other sources (the runner's state is reset between
    decodes: an RNN's hidden state, a KV cache): the Python replay's tokens and scores."""
    native, python, high = pairs[name]
    made = _runners_made(monkeypatch)
    batches = [_sources(native, high, rows, width) for rows, width in ((1, 6), (3, 9), (1, 6), (15, 4))]
    batches += [_sources(native, high, 1, 6), _sources(native, high, 3, 9)]  # the same shapes again
    for opts in (dict(max_length=9), dict(max_length=7, min_length=5)):
        for sources in batches:
            got = native.generate(sources, return_scores=True, **opts)
            want = python.generate(sources, return_scores=True, **opts)
            assert [r.ids for r in got] == [r.ids for r in want]
            np.testing.assert_allclose([r.scores for r in got], [r.scores for r in want], rtol=1e-5, atol=1e-5)
            assert all(r.scores is None for r in native.generate(sources, **opts))
    assert len(made) == len(set(made)) == 6  # one runner per (rows, width, max_length), reused after


def test_runner_serves_concurrent_callers(pairs):
    """Four threads decoding on one model get the tokens of a serial decode (each its own runner)."""
    native, _, high = pairs["marian"]
    work = [_sources(native, high, rows, 7) for rows in (1, 2, 1, 3) * 3]
    want = [[r.ids for r in native.generate(s, max_length=10)] for s in work]
    got, errors = {}, []

    def run(t):
        try:
            for i in range(t, len(work), 4):
                got[i] = [r.ids for r in native.generate(work[i], max_length=10)]
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert [got[i] for i in range(len(work))] == want


def test_runner_not_used_where_it_does_not_apply(pairs, monkeypatch):
    """The Python replay, beam search with attention output, 16 rows or more (sources x beams), or a
    callback: no runner (beam search runs on BeamRunners: tests/decoding/test_native_beam.py)."""
    native, python, high = pairs["g2p-gru"]
    made = _runners_made(monkeypatch)
    src = _sources(native, high, 2, 5)
    python.generate(src, max_length=6)
    attention = pairs["g2p-attention"][0]
    attention.generate(_sources(attention, None, 2, 5), max_length=6, beam_size=2, return_attention=True)
    native.generate(_sources(native, high, 16, 5), max_length=6)
    native.generate(_sources(native, high, 4, 5), max_length=6, beam_size=4)
    native.generate(src, max_length=6, callback=lambda tok: False)
    assert made == []
    native.generate(src, max_length=6)
    assert len(made) == 1


def test_idle_runners_are_bounded(pairs, monkeypatch):
    """Idle runners past MAX_IDLE_BYTES (their plans and KV caches) or MAX_SHAPES are dropped, least
    recently used first, their plans given back; the most recent shape always stays."""
    native, python, high = pairs["g2p-transformer"]
    pool = runner_pool.RunnerPool()
    released, real_close = [], greedy_runner.GreedyRunner.close

    def close(self):
        released.append(self)
        real_close(self)
    monkeypatch.setattr(greedy_runner.GreedyRunner, "close", close)
    from seqjit.decoding.inputs import pad_sources, parse_options

    opts = parse_options(dict(max_length=5))

    def decode(width):
        ids, lens = pad_sources(_sources(native, high, 1, width), native.pad_id)
        return pool.decode(native, ids, lens, opts, np.zeros(0, np.int64))
    decode(3)
    first = pool._idle_bytes
    assert first > 0 and not released
    monkeypatch.setattr(runner_pool, "MAX_IDLE_BYTES", first + 1)  # room for one shape
    decode(4)
    assert len(released) == 1 and [k[0] for k in pool._idle] == [(1, 4)]
    assert pool._idle_bytes == sum(r.nbytes for rs in pool._idle.values() for r in rs)
    monkeypatch.setattr(runner_pool, "MAX_IDLE_BYTES", 1 << 40)
    monkeypatch.setattr(runner_pool, "MAX_SHAPES", 2)
    for width in (5, 6, 7):
        decode(width)
    assert [k[0] for k in pool._idle] == [(1, 6), (1, 7)] and len(released) == 3
