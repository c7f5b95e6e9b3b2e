"""Property-based: bad decoding options and sources give a clear error naming what is wrong, or a
correct result, quickly (issue 12, acceptance). Never a raw NumPy error, a hang, or output that
breaks the options (ids outside the vocabulary, longer than max_length, a wrong count)."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqjit.decoding import DecodingOptions

NAMES = [f.name for f in dataclasses.fields(DecodingOptions)]
ODD_NUMBERS = st.sampled_from([0, -1, 1, 2, 3, 7, 10**9, 2**70, 0.5, -0.0, 1.5, math.nan, math.inf, -math.inf])
VALUES = st.one_of(ODD_NUMBERS, st.booleans(), st.none(), st.just("3"), st.just([1]), st.integers(-5, 40))
VALID = dict(max_length=st.integers(1, 12), min_length=st.integers(0, 4), beam_size=st.integers(1, 3),
             num_hypotheses=st.just(1), num_beam_groups=st.integers(1, 3), diversity_penalty=st.floats(0, 1.5),
             length_penalty=st.floats(0, 2), repetition_penalty=st.floats(1, 2),
             no_repeat_ngram_size=st.integers(0, 3), sampling_topk=st.integers(0, 5),
             sampling_topp=st.floats(0.1, 1), sampling_temperature=st.floats(0.5, 2), seed=st.integers(0, 5),
             forced_bos_id=st.integers(0, 10), forced_eos_id=st.integers(0, 10), return_scores=st.booleans(), return_attention=st.booleans(),
             suppress_tokens=st.lists(st.integers(0, 10), max_size=3),
             begin_suppress_tokens=st.lists(st.integers(0, 10), max_size=3),
             bad_words_ids=st.lists(st.lists(st.integers(0, 10), min_size=1, max_size=3), max_size=2),
             suppress_pad_token=st.booleans(),
             end_token=st.one_of(st.integers(0, 10), st.lists(st.integers(0, 10), min_size=1, max_size=3)),
             return_end_token=st.booleans(), max_input_length=st.integers(0, 6), truncate_input=st.booleans(),
             return_alternatives=st.booleans(), min_alternative_expansion_prob=st.floats(0, 1),
             target_prefix=st.lists(st.one_of(st.none(), st.lists(st.integers(0, 10), max_size=3)), min_size=1,
                                    max_size=3))


@pytest.fixture(scope="module")
def model():
    from seqjit.g2p import G2P

    return G2P("gru").model


def _value(name):
    """Mostly a sensible value (so that many calls decode), sometimes an odd one."""
    return st.one_of(VALID[name], VALID[name], VALID[name], VALUES)


def _options():
    """Up to four options, or now and then a misspelt one."""
    keys = st.lists(st.sampled_from(NAMES), max_size=4, unique=True)
    known = keys.flatmap(lambda ks: st.fixed_dictionaries({k: _value(k) for k in ks}))
    misspelt = st.dictionaries(st.sampled_from(["beam", "topk", "max_len"]), VALUES, min_size=1, max_size=1)
    return st.one_of(known, known, known, known, misspelt)


SOURCES = st.one_of(
    st.lists(st.lists(st.integers(3, 32), min_size=0, max_size=6), min_size=1, max_size=3),
    st.lists(st.lists(st.integers(-3, 40), min_size=1, max_size=4), min_size=1, max_size=2),
    st.sampled_from([[], "abc", [[1, [2]]], [["a"]], [[1.5, 2]], [[3, 4]] * 2, None, 5]),
)


@settings(max_examples=120, deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(options=_options(), sources=SOURCES)
def test_bad_options_and_sources_give_a_clear_error_or_a_correct_result(model, options, sources):
    try:
        results = model.generate(sources, **options)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        named = NAMES + ["sources", "decoding option", "source vocabulary"]
        assert any(n in message for n in named), f"unclear error for {options}, {sources!r}: {message}"
        return
    opts = DecodingOptions(**options)
    assert len(results) == len(sources)
    vocab = model.target_vocab_size
    for r in results:
        dropped = opts.return_alternatives and opts.min_alternative_expansion_prob > 0  # may drop them all
        assert (0 if dropped else 1) <= len(r.ids) <= max(opts.num_hypotheses, 1)
        for ids in r.ids:
            assert len(ids) <= opts.max_length
            assert all(0 <= t < vocab for t in ids)
            # forced tokens (and a target_prefix) override suppression, as in transformers
            forced = {opts.forced_bos_id, opts.forced_eos_id} | {t for p in opts.target_prefix or () for t in p}
            assert not (set(ids) & set(opts.suppress_tokens or ())) - forced, (ids, opts)
        if opts.return_scores:
            assert all(np.isfinite(s) or s == -np.inf for s in r.scores)
