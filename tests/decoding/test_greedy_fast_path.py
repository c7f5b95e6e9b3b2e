"""Greedy without scores (no copy, no log-softmax) gives the tokens of greedy with scores."""
import numpy as np
import pytest

from seqjit.decoding import processors

EOS, PAD = 0, 95  # as in tests/decoding/conftest.py


@pytest.mark.parametrize("opts", [dict(max_length=12), dict(max_length=12, min_length=12),
                                  dict(max_length=9, min_length=4, no_repeat_ngram_size=2)])
def test_tokens_do_not_depend_on_scores(random_sources, marian_pair, monkeypatch, opts):
    _, model = marian_pair
    sources = random_sources(12, seed=11)
    real_step = type(model).step

    def step(self, state, tokens, **kw):  # make the end token (odd steps) or pad (even steps) best in some rows
        out = real_step(self, state, tokens, **kw)
        out[tokens % 3 == 0, EOS if state.step % 2 else PAD] += 30.0
        return out
    monkeypatch.setattr(type(model), "step", step)
    with_scores = model.generate(sources, return_scores=True, **opts)
    calls = []
    real = processors.process
    monkeypatch.setattr(processors, "process", lambda *a: calls.append(a[2]) or real(*a))
    without = model.generate(sources, **opts)
    assert [r.ids for r in without] == [r.ids for r in with_scores]
    assert all(r.scores is None for r in without)
    if opts.get("min_length") == 12:  # the slow path ran where the end token or pad was some row's best
        assert 0 < len(calls) < 12
    else:
        assert any(len(r.ids[0]) < opts["max_length"] for r in without)  # some rows ended early
    if "no_repeat_ngram_size" in opts:  # processors that change scores: always the slow path
        assert len(calls) >= opts["min_length"]


def test_token_log_probs_equal_log_softmax():
    x = np.random.default_rng(0).standard_normal((5, 301)).astype(np.float32) * 4
    x[1, :7] = -np.inf
    tokens = np.array([0, 9, 300, 17, 5])
    np.testing.assert_array_equal(processors.token_log_probs(x, tokens), processors.log_softmax(x)[np.arange(5), tokens])
