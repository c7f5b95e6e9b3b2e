"""Decoding against transformers' MarianMTModel.generate on the same random weights."""
import numpy as np
import pytest
import torch

VOCAB, PAD, EOS = 96, 95, 0  # as in tests/decoding/conftest.py

N_SOURCES = 20


def hf_generate(marian_generate, hf, sources, **kwargs):
    """Run transformers generate on padded sources; returns per source (ids list, score)."""
    out = marian_generate(hf, sources, return_dict_in_generate=True, output_scores=True, **kwargs)
    n_ret = kwargs.get("num_return_sequences", 1)
    seqs = out.sequences[:, 1:].tolist()  # drop the decoder start token
    if kwargs.get("num_beams", 1) > 1:
        scores = out.sequences_scores.tolist()
    else:
        trans = hf.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        scores = []
    results = []
    for i, seq in enumerate(seqs):
        cut = seq.index(EOS) if EOS in seq else len(seq)
        if scores:
            score = scores[i]
        else:
            score = float(trans[i, :min(cut + 1, trans.shape[1])].sum())
        results.append((seq[:cut], score))
    return [results[i * n_ret:(i + 1) * n_ret] for i in range(len(sources))]


def _check(ours, theirs):
    for i, (res, ref) in enumerate(zip(ours, theirs)):
        assert len(res.ids) == len(ref)
        for h, (ref_ids, ref_score) in enumerate(ref):
            assert res.ids[h] == ref_ids, f"source {i}, hypothesis {h}"
            assert res.scores[h] == pytest.approx(ref_score, abs=1e-4), f"source {i}, hypothesis {h}"


@pytest.mark.parametrize("min_new", [0, 3])
def test_greedy_matches_transformers(random_sources, marian_pair, marian_generate, min_new):
    hf, model = marian_pair
    sources = random_sources(N_SOURCES)
    ref = hf_generate(marian_generate, hf, sources, num_beams=1, max_new_tokens=12, min_new_tokens=min_new,
                      no_repeat_ngram_size=1)
    opts = dict(max_length=12, min_length=min_new, no_repeat_ngram_size=1, return_scores=True)
    _check(model.generate(sources, **opts), ref)
    _check([model.generate([s], **opts)[0] for s in sources], ref)  # one by one: the same


@pytest.mark.parametrize("length_penalty,min_new", [(1.0, 0), (0.6, 2), (1.4, 0)])
def test_beam_search_matches_transformers(random_sources, marian_pair, marian_generate, length_penalty,
                                          min_new):
    hf, model = marian_pair
    sources = random_sources(N_SOURCES, seed=2)
    ref = hf_generate(marian_generate, hf, sources, num_beams=4, num_return_sequences=2, max_new_tokens=10,
                      min_new_tokens=min_new, no_repeat_ngram_size=1, length_penalty=length_penalty)
    opts = dict(beam_size=4, num_hypotheses=2, max_length=10, min_length=min_new, no_repeat_ngram_size=1,
                length_penalty=length_penalty, return_scores=True)
    _check(model.generate(sources, **opts), ref)
    _check([model.generate([s], **opts)[0] for s in sources[:6]], ref[:6])


def test_batched_results_equal_alone_with_small_batches(random_sources, marian_pair):
    _, model = marian_pair
    sources = random_sources(9, seed=3)
    opts = dict(max_length=8, no_repeat_ngram_size=2, repetition_penalty=1.3, return_scores=True)
    batched = model.generate(sources, max_batch_size=4, **opts)
    alone = [model.generate([s], **opts)[0] for s in sources]
    assert [r.ids for r in batched] == [r.ids for r in alone]
    np.testing.assert_allclose([r.scores for r in batched], [r.scores for r in alone], atol=1e-4)


def test_stream_and_callback_match_generate(random_sources, marian_pair):
    _, model = marian_pair
    src = random_sources(1, seed=4)[0]
    full = model.generate([src], max_length=10, no_repeat_ngram_size=1)[0].ids[0]
    streamed = [t.token for t in model.generate_stream(src, max_length=10, no_repeat_ngram_size=1)]
    assert streamed[:len(full)] == full and (len(streamed) == len(full) or streamed[-1] == EOS)
    seen = []
    stopped = model.generate([src], max_length=10, no_repeat_ngram_size=1, callback=lambda t: seen.append(t.token) or len(seen) == 3)
    assert seen == full[:3] and stopped[0].ids[0] == full[:3]


def test_sampling_is_reproducible_and_respects_topk(random_sources, marian_pair):
    hf, model = marian_pair
    sources = random_sources(5, seed=5)
    a = model.generate(sources, sampling_topk=5, sampling_temperature=0.8, seed=7, max_length=8)
    b = model.generate(sources, sampling_topk=5, sampling_temperature=0.8, seed=7, max_length=8)
    assert [r.ids for r in a] == [r.ids for r in b]
    # every sampled token is among the 5 best continuations of its prefix (checked with transformers)
    for src, res in zip(sources, a):
        prefix = [PAD]
        for tok in res.ids[0]:
            with torch.inference_mode():
                logits = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([prefix])).logits[0, -1]
                logits[PAD] = -float("inf")
                best5 = torch.topk(logits, 5).indices.tolist()
            assert tok in best5
            prefix.append(tok)


def test_return_attention_shapes(random_sources, marian_pair):
    _, model = marian_pair
    sources = random_sources(3, seed=6)
    for beam in (1, 3):
        res = model.generate(sources, beam_size=beam, max_length=6, return_attention=True)
        for src, r in zip(sources, res):
            att = r.attention[0]
            assert att.shape[0] >= len(r.ids[0]) and att.shape[-1] >= len(src)
            np.testing.assert_allclose(att[..., :len(src)].sum(-1), 1.0, atol=1e-5)


def test_bad_options_are_named(random_sources, marian_pair):
    _, model = marian_pair
    with pytest.raises(ValueError, match="num_hypotheses"):
        model.generate([[1, 2]], beam_size=2, num_hypotheses=3)
    with pytest.raises(ValueError, match="sampling_topp"):
        model.generate([[1, 2]], sampling_topk=0, sampling_topp=0.0)
    with pytest.raises(TypeError, match="unknown decoding option"):
        model.generate([[1, 2]], beam=2)
    with pytest.raises(TypeError, match=r"sources\[1\]"):
        model.generate([[1, 2], [1.5]])
    with pytest.raises(ValueError, match=r"sources\[0\] holds token id"):
        model.generate([[1, 2, 500]])
