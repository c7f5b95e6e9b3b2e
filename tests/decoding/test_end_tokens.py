"""Several end tokens (``end_token``, an id or a list: any of them ends a hypothesis) and
``return_end_token``, against transformers' ``generate`` with an ``eos_token_id`` list on the tiny
random Marian (greedy and beam 4), ids and scores."""
from collections import Counter

import numpy as np

import pytest

EOS = 0  # as in tests/decoding/conftest.py
N_SOURCES = 20


def _reference(marian_generate, hf, sources, ends, **kwargs):
    """Per source: [(ids up to and including the first end token, score)] of transformers."""
    out = marian_generate(hf, sources, return_dict_in_generate=True, output_scores=True, eos_token_id=list(ends),
                          **kwargs)
    n = kwargs.get("num_return_sequences", 1)
    beam = kwargs.get("num_beams", 1) > 1
    trans = None if beam else hf.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    rows = []
    for i, seq in enumerate(out.sequences[:, 1:].tolist()):
        cut = next((k + 1 for k, t in enumerate(seq) if t in ends), len(seq))
        score = float(out.sequences_scores[i]) if beam else float(trans[i, :cut].sum())
        rows.append((seq[:cut], score))
    return [rows[i * n:(i + 1) * n] for i in range(len(sources))]


@pytest.fixture
def second_end(marian_pair, random_sources):
    """A token the tiny Marian often generates greedily (so that it ends many hypotheses)."""
    _, model = marian_pair
    counts = Counter(t for r in model.generate(random_sources(N_SOURCES), max_length=12, no_repeat_ngram_size=1)
                     for t in r.ids[0])
    return counts.most_common(1)[0][0]


def _check(ours, theirs, ends, keep_end):
    ended_by_second = 0
    for i, (res, ref) in enumerate(zip(ours, theirs)):
        assert len(res.ids) == len(ref)
        for h, (ids, score) in enumerate(ref):
            want = ids if keep_end or not ids or ids[-1] not in ends else ids[:-1]
            assert res.ids[h] == want, f"source {i}, hypothesis {h}"
            assert res.scores[h] == pytest.approx(score, abs=1e-4), f"source {i}, hypothesis {h}"
            ended_by_second += bool(ids) and ids[-1] == ends[1]
    assert ended_by_second  # the second end token did end some hypotheses


@pytest.mark.parametrize("keep_end", [False, True])
def test_greedy_stops_at_any_end_token(random_sources, marian_pair, marian_generate, second_end, keep_end):
    hf, model = marian_pair
    sources, ends = random_sources(N_SOURCES), (EOS, second_end)
    ref = _reference(marian_generate, hf, sources, ends, num_beams=1, max_new_tokens=12, no_repeat_ngram_size=1)
    got = model.generate(sources, max_length=12, no_repeat_ngram_size=1, end_token=list(ends),
                         return_end_token=keep_end, return_scores=True)
    _check(got, ref, ends, keep_end)


@pytest.mark.parametrize("keep_end", [False, True])
def test_beam_search_stops_at_any_end_token(random_sources, marian_pair, marian_generate, second_end, keep_end):
    hf, model = marian_pair
    sources, ends = random_sources(N_SOURCES, seed=2), (EOS, second_end)
    ref = _reference(marian_generate, hf, sources, ends, num_beams=4, num_return_sequences=2, max_new_tokens=10,
                     no_repeat_ngram_size=1)
    got = model.generate(sources, beam_size=4, num_hypotheses=2, max_length=10, no_repeat_ngram_size=1,
                         end_token=list(ends), return_end_token=keep_end, return_scores=True)
    _check(got, ref, ends, keep_end)


def test_one_end_token_replaces_the_model_s(marian_pair, second_end):
    """``end_token`` an id: that token ends, the model's own does not (CTranslate2's end_token)."""
    _, model = marian_pair
    for res in model.generate([[5, 6, 7], [8, 9]], max_length=12, end_token=second_end, return_end_token=True):
        ids = res.ids[0]
        assert second_end not in ids[:-1] and (len(ids) == 12 or ids[-1] == second_end)


@pytest.mark.parametrize("bad, match", [(-1, "end_token"), ((), "end_token"), ("0", "end_token"),
                                        ((0, 96), r"end_token holds token id 96, outside the target vocabulary")])
def test_a_bad_end_token_is_refused_by_name(marian_pair, bad, match):
    _, model = marian_pair
    with pytest.raises(ValueError, match=match):
        model.generate([[5, 6]], end_token=bad)


@pytest.mark.parametrize("beam", [1, 4])
def test_a_generation_config_eos_list_is_the_model_s_end_token(tmp_path, beam):
    """A Hugging Face ``generation_config.eos_token_id`` list (several distinct ids) is honoured: any
    of them ends a hypothesis, as transformers' generate (which reads the same file) stops."""
    import torch

    import seqjit

    from ..models.conftest import tiny_hf

    tiny_hf("bart", tmp_path / "plain")
    plain = seqjit.from_hf(tmp_path / "plain")
    sources = [[int(t) for t in np.random.default_rng(i).integers(3, 96, 6)] for i in range(12)]
    counts = Counter(t for r in plain.generate(sources, max_length=10) for t in r.ids[0])
    second = next(t for t, _ in counts.most_common() if t != plain.eos_id)
    hf = tiny_hf("bart", tmp_path / "listed", generation={"eos_token_id": [plain.eos_id, second]})
    model = seqjit.from_hf(tmp_path / "listed")
    assert model.config.end_token == [plain.eos_id, second] and model.eos_id == plain.eos_id
    ends = (plain.eos_id, second)
    got = model.generate(sources, beam_size=beam, max_length=10, return_scores=True, return_end_token=True)
    stopped = 0
    for i, src in enumerate(sources):
        with torch.inference_mode():
            out = hf.generate(input_ids=torch.tensor([src]), num_beams=beam, max_new_tokens=10, do_sample=False,
                              bad_words_ids=[[model.pad_id]], return_dict_in_generate=True, output_scores=True)
        seq = out.sequences[0, 1:].tolist()
        cut = next((k + 1 for k, t in enumerate(seq) if t in ends), len(seq))
        assert got[i].ids[0] == seq[:cut], f"source {i}"
        if beam > 1:
            assert got[i].scores[0] == pytest.approx(float(out.sequences_scores[0]), abs=1e-4), f"source {i}"
        stopped += seq[cut - 1] == second
    assert stopped  # the second end token did end some hypotheses
