"""``return_alternatives`` (the num_hypotheses best tokens at the first position after the
target_prefix, each continued by the search) against CTranslate2's ``return_alternatives`` on the
same converted Marian, greedy and beam 4."""
import pytest
import torch

from .test_scoring import _name
from .test_target_prefix import EOS, PREFIXES, _sources, _translator, marian, plain_marian  # noqa: F401

MAX_LENGTH = 10


@pytest.mark.parametrize("beam, which", [(1, "marian"), (1, "plain"), (4, "plain")])
def test_equals_ctranslate2_return_alternatives(marian, plain_marian, beam, which):  # noqa: F811
    """CTranslate2 4.8: at the first free position the end token is banned and the 3 best tokens are
    the alternatives (in that order); each is continued by the search; a score is the alternative's
    log-probability plus its continuation's (length_penalty 0: CTranslate2 normalises the two parts
    apart). Beam 4 on the Marian whose hypotheses run to max_length (see test_target_prefix).
    Prefixes of at most one token: with a longer one CTranslate2 runs the decoder over the prefix in
    one call, and its log-probabilities there differ from transformers' teacher-forced ones (by up to
    0.5 on this model; its target_prefix mode agrees), which the next test checks against."""
    _, model, path = marian if which == "marian" else plain_marian
    prefixes = [p for p in PREFIXES if len(p or []) <= 1] * 2
    sources = _sources(len(prefixes), seed=11)
    theirs = _translator(path).translate_batch(
        [[_name(i) for i in s] for s in sources],
        target_prefix=[None if not p else [_name(i) for i in p] for p in prefixes], beam_size=beam,
        num_hypotheses=3, return_alternatives=True, max_decoding_length=MAX_LENGTH, min_decoding_length=0,
        length_penalty=0.0, return_scores=True)
    ours = model.generate(sources, target_prefix=prefixes, beam_size=beam, num_hypotheses=3, return_alternatives=True,
                          max_length=MAX_LENGTH, length_penalty=0.0, return_scores=True, max_batch_size=3)
    for i, (res, ref) in enumerate(zip(ours, theirs)):
        assert [[_name(t) for t in ids] for ids in res.ids] == ref.hypotheses, f"source {i}"
        assert res.scores == pytest.approx(ref.scores, abs=1e-4), f"source {i}"
    if which == "marian":
        assert any(len(ids) < MAX_LENGTH for r in ours for ids in r.ids)  # some continuations end


@pytest.mark.parametrize("beam", [1, 4])
def test_equals_transformers_expansion_and_continuation(marian, beam):  # noqa: F811
    """Every prefix (up to 5 tokens, one holding the end token): the alternatives are the 3 best of
    transformers' log-softmax after the prefix (pad and end banned, renormalised), each continued as
    transformers' generate with ``decoder_input_ids`` [start] + prefix + [alternative]."""
    hf, model, _ = marian
    sources = _sources(len(PREFIXES), seed=12)
    ours = model.generate(sources, target_prefix=PREFIXES, beam_size=beam, num_hypotheses=3, return_alternatives=True,
                          max_length=MAX_LENGTH, length_penalty=0.0, return_scores=True)
    for i, (src, prefix) in enumerate(zip(sources, PREFIXES)):
        prompt = [model.decoder_start_id] + list(prefix or [])
        with torch.inference_mode():
            logits = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([prompt])).logits[0, -1]
            logits[[model.pad_id, EOS]] = -float("inf")
            logp = logits.log_softmax(-1)
            alts = torch.topk(logp, 3).indices.tolist()
            want_ids, want_scores = [], []
            for alt in alts:
                out = hf.generate(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([prompt + [alt]]),
                                  bad_words_ids=[[model.pad_id]], do_sample=False, num_beams=beam,
                                  max_length=MAX_LENGTH + 1, return_dict_in_generate=True, output_scores=True,
                                  **({"length_penalty": 0.0} if beam > 1 else {}))
                seq = out.sequences[0, 1:].tolist()
                p = len(prompt)
                cut = next((k for k in range(p, len(seq)) if seq[k] == EOS), None)
                if beam > 1:
                    rest = float(out.sequences_scores[0])
                else:
                    steps = hf.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
                    rest = float(steps[:(len(seq) if cut is None else cut + 1) - p].sum())
                want_ids.append(seq if cut is None else seq[:cut])
                want_scores.append(float(logp[alt]) + rest)
        assert ours[i].ids == want_ids, f"source {i}"
        assert ours[i].scores == pytest.approx(want_scores, abs=1e-4), f"source {i}"


def test_a_prefix_filling_max_length_is_every_alternative(marian):  # noqa: F811
    _, model, _ = marian
    res = model.generate([[5, 6, EOS]], target_prefix=[[7, 8, 9]], max_length=3, num_hypotheses=2,
                         return_alternatives=True, return_scores=True)
    assert res[0].ids == [[7, 8, 9], [7, 8, 9]] and res[0].scores == [0.0, 0.0]


def test_alternatives_refuse_a_callback_and_a_stream(marian):  # noqa: F811
    _, model, _ = marian
    with pytest.raises(ValueError, match="callback cannot be combined with return_alternatives"):
        model.generate([[5, EOS]], return_alternatives=True, num_hypotheses=2, callback=lambda token: None)
    with pytest.raises(ValueError, match="return_alternatives must be False"):
        next(model.generate_stream([5, EOS], return_alternatives=True))
    with pytest.raises(ValueError, match="return_alternatives must be True or False"):
        model.generate([[5, EOS]], return_alternatives="yes")


@pytest.mark.parametrize("least", [0.05, 0.1])
def test_min_alternative_expansion_prob_equals_ctranslate2(plain_marian, least):  # noqa: F811
    """Alternatives less likely than the bar are dropped, as CTranslate2 drops them (fewer hypotheses).
    Bars that leave every source one: CTranslate2 4.8 dies of a floating-point exception when a
    source keeps none (seqjit returns no hypothesis for it: the next test)."""
    _, model, path = plain_marian
    prefixes = [None, [30], [], [60]] * 2
    sources = _sources(len(prefixes), seed=13)
    theirs = _translator(path).translate_batch(
        [[_name(i) for i in s] for s in sources],
        target_prefix=[None if not p else [_name(i) for i in p] for p in prefixes], beam_size=1, num_hypotheses=4,
        return_alternatives=True, min_alternative_expansion_prob=least, max_decoding_length=MAX_LENGTH,
        min_decoding_length=0, length_penalty=0.0, return_scores=True)
    ours = model.generate(sources, target_prefix=prefixes, num_hypotheses=4, return_alternatives=True,
                          min_alternative_expansion_prob=least, max_length=MAX_LENGTH, return_scores=True)
    assert any(len(r.ids) < 4 for r in ours)  # the bar dropped some
    for i, (res, ref) in enumerate(zip(ours, theirs)):
        assert [[_name(t) for t in ids] for ids in res.ids] == ref.hypotheses, f"source {i}"
        assert res.scores == pytest.approx(ref.scores, abs=1e-4), f"source {i}"


def test_a_source_whose_alternatives_are_all_dropped_has_none(plain_marian):  # noqa: F811
    _, model, _ = plain_marian
    got = model.generate(_sources(4, seed=13), num_hypotheses=4, return_alternatives=True,
                         min_alternative_expansion_prob=0.3, max_length=MAX_LENGTH, return_scores=True)
    assert any(r.ids == [] and r.scores == [] for r in got)
    with pytest.raises(ValueError, match=r"min_alternative_expansion_prob must be in \[0, 1\]"):
        model.generate([[5, EOS]], return_alternatives=True, min_alternative_expansion_prob=1.5)
