"""Greedy and beam-4 decoding of BART, mBART, M2M100 and Pegasus against ``transformers.generate``
on the same weights and options (each family's decoder start, forced BOS and forced EOS rules), through
the native and the Python replay."""
import numpy as np
import pytest
import torch

import seqjit

from .conftest import FAMILIES, tiny_hf

N_SOURCES = 50
MAX_NEW = 10


def _sources(n, vocab, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, vocab, size=int(rng.integers(1, 14))).tolist() for _ in range(n)]


def hf_generate(hf, model, sources, **kwargs):
    """(ids without the start and end tokens, score) per source from transformers' generate; padding
    is never generated (seqjit bans the pad token, as transformers does for Marian) unless
    ``bad_words_ids`` is given (None: none)."""
    pad = model.pad_id
    width = max(len(s) for s in sources)
    ids = torch.full((len(sources), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(sources):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    kwargs.setdefault("max_new_tokens", MAX_NEW)
    bad = kwargs.pop("bad_words_ids", [[pad]])
    if bad is not None:
        kwargs["bad_words_ids"] = bad
    with torch.inference_mode():
        out = hf.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                          return_dict_in_generate=True, output_scores=True, **kwargs)
    results = []
    for i, seq in enumerate(out.sequences[:, 1:].tolist()):
        cut = seq.index(model.eos_id) if model.eos_id in seq else len(seq)
        score = float(out.sequences_scores[i]) if kwargs.get("num_beams", 1) > 1 else None
        results.append((seq[:cut], score))
    return results


def _check(model, sources, ref, **opts):
    for replay in (None, "python"):
        model.set_replay(replay)
        try:
            got = model.generate(sources, max_length=MAX_NEW, return_scores=True, **opts)
        finally:
            model.set_replay(None)
        for i, (res, (ids, score)) in enumerate(zip(got, ref)):
            assert res.ids[0] == ids, f"source {i} ({replay or 'native'} replay)"
            if score is not None:
                assert res.scores[0] == pytest.approx(score, abs=1e-4), f"source {i}"


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("family", FAMILIES)
def test_generate_matches_transformers(hf_family, family, beam):
    hf, model, _ = hf_family(family)
    sources = _sources(N_SOURCES, model.target_vocab_size, seed=beam)
    ref = hf_generate(hf, model, sources, num_beams=beam)
    _check(model, sources, ref, beam_size=beam)
    if model.config.forced_eos_id is not None:  # BART/mBART/Pegasus: some hypotheses end by the rule
        assert any(len(ids) == MAX_NEW - 1 for ids, _ in ref)


@pytest.mark.parametrize("beam", [1, 4])
def test_nllb_style_forced_bos_token(tmp_path, beam):
    """M2M100 with the target language in generation_config.json (forced_bos_token_id), and another
    language given per call."""
    hf = tiny_hf("m2m_100", tmp_path, seed=2, generation={"forced_bos_token_id": 7})
    model = seqjit.from_hf(tmp_path)
    assert model.config.forced_bos_id == 7
    sources = _sources(N_SOURCES, model.target_vocab_size, seed=5)
    ref = hf_generate(hf, model, sources, num_beams=beam)
    assert all(ids[0] == 7 for ids, _ in ref)
    _check(model, sources, ref, beam_size=beam)
    _check(model, sources[:3], ref[:3], beam_size=beam)  # a small batch (another greedy path)
    ref = hf_generate(hf, model, sources, num_beams=beam, forced_bos_token_id=11)
    assert all(ids[0] == 11 for ids, _ in ref)
    _check(model, sources, ref, beam_size=beam, forced_bos_id=11)


def test_forced_tokens_checked(hf_family):
    _, model, _ = hf_family("bart")
    with pytest.raises(ValueError, match="forced_bos_id 500 is outside the target vocabulary"):
        model.generate([[5, 6]], forced_bos_id=500)
    with pytest.raises(ValueError, match="forced_eos_id must be a non-negative integer"):
        model.generate([[5, 6]], forced_eos_id=-1)


@pytest.mark.parametrize("family", ["bart", "m2m_100"])
def test_generate_with_ngram_ban_matches_transformers(hf_family, family):
    """No repeated bigram: longer varied outputs, so every decoder position is exercised."""
    hf, model, _ = hf_family(family)
    sources = _sources(20, model.target_vocab_size, seed=9)
    for beam in (1, 4):
        ref = hf_generate(hf, model, sources, num_beams=beam, no_repeat_ngram_size=2)
        _check(model, sources, ref, beam_size=beam, no_repeat_ngram_size=2)


@pytest.mark.parametrize("max_new", [1, 2, 5])
@pytest.mark.parametrize("beam", [1, 4])
def test_forced_first_and_last_tokens_at_short_lengths(hf_family, beam, max_new):
    """BART forces its end token at the last step; with a forced first token too, at 1 token the end
    token wins (transformers applies it last). Small and large batches, both replays."""
    hf, model, _ = hf_family("bart")
    sources = _sources(20, model.target_vocab_size, seed=11)
    for bos in (None, 7):
        extra = {} if bos is None else {"forced_bos_token_id": bos}
        ref = hf_generate(hf, model, sources, num_beams=beam, max_new_tokens=max_new, min_new_tokens=max_new, **extra)
        opts = dict(beam_size=beam, max_length=max_new, min_length=max_new, forced_bos_id=bos)
        for replay in (None, "python"):
            model.set_replay(replay)
            try:
                for part in (sources, sources[:2]):
                    got = [r.ids[0] for r in model.generate(part, **opts)]
                    assert got == [ids for ids, _ in ref[:len(part)]], (bos, replay, len(part))
            finally:
                model.set_replay(None)
