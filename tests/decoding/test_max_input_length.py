"""``max_input_length``: a longer source refused by name (the default), or with ``truncate_input``
cut to its first ``max_input_length`` tokens, the result saying so; checked against transformers'
``generate`` of the cut sources on the tiny random Marian (greedy and beam 4)."""
import numpy as np
import pytest

from seqjit.errors import SourceTooLong

LIMIT = 6


def _reference(marian_generate, hf, sources, **kwargs):
    out = marian_generate(hf, [s[:LIMIT] for s in sources], **kwargs)
    n = kwargs.get("num_return_sequences", 1)
    rows = [seq[:seq.index(0)] if 0 in seq else seq for seq in out[:, 1:].tolist()]
    return [rows[i * n:(i + 1) * n] for i in range(len(sources))]


@pytest.mark.parametrize("beam", [1, 4])
def test_truncated_sources_decode_as_their_first_tokens(random_sources, marian_pair, marian_generate, beam):
    hf, model = marian_pair
    sources = random_sources(20, seed=3)
    assert any(len(s) > LIMIT for s in sources) and any(len(s) <= LIMIT for s in sources)
    ref = _reference(marian_generate, hf, sources, num_beams=beam, max_new_tokens=10, no_repeat_ngram_size=1)
    for max_batch_size in (64, 3):
        got = model.generate(sources, max_input_length=LIMIT, truncate_input=True, beam_size=beam, max_length=10,
                             no_repeat_ngram_size=1, max_batch_size=max_batch_size)
        assert [r.ids[:1] for r in got] == [r[:1] for r in ref]
        assert [r.truncated for r in got] == [len(s) > LIMIT for s in sources]


def test_a_longer_source_is_refused_by_name(marian_pair):
    _, model = marian_pair
    sources = [[5, 6], list(range(1, 10)), list(range(1, 12))]
    with pytest.raises(SourceTooLong, match=r"sources\[1\] has 9 tokens, more than max_input_length 8"):
        model.generate(sources, max_input_length=8)
    with pytest.raises(SourceTooLong, match=r"sources\[0\] has 9 tokens"):
        next(model.generate_stream(list(range(1, 10)), max_input_length=8))
    assert not any(r.truncated for r in model.generate(sources, max_input_length=11))  # at the limit: kept
    padded = np.array([[5, 6, 7, 8], [5, 6, 0, 0]])
    assert not model.generate(padded, lengths=np.array([2, 2]), max_input_length=2)[0].truncated  # lengths count


@pytest.mark.parametrize("bad", [-1, 1.5, True, "8"])
def test_a_bad_limit_is_refused_by_name(marian_pair, bad):
    _, model = marian_pair
    with pytest.raises(ValueError, match="max_input_length"):
        model.generate([[5, 6]], max_input_length=bad)
