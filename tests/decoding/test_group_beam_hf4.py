"""Group (diverse) beam search against ``transformers`` 4.x's own ``group_beam_search`` (gone from
transformers 5, which loads it from a Hub repository): run by .ci/hf4 in a venv with transformers 4.56.2
(``-m hf4``; every other run deselects these). A seeded tiny Marian built and saved by transformers 4,
loaded with ``seqjit.from_hf`` (its end token's logit raised, so that hypotheses end at every length
and some run to max_length); 50 sources, every returned hypothesis's ids equal and its score
(``sequences_scores``: sum of log-probabilities / length ** length_penalty, the end token counted)
within 1e-4."""
import numpy as np
import pytest

pytestmark = pytest.mark.hf4

PAD, EOS = 95, 0


@pytest.fixture(scope="module")
def pair(tmp_path_factory, make_tiny_marian):
    import seqjit
    import transformers

    assert transformers.__version__.startswith("4."), transformers.__version__
    import torch

    hf = make_tiny_marian(seed=3)
    with torch.no_grad():  # the end token's logit raised: hypotheses end at many lengths, some run to max_length
        hf.final_logits_bias[0, EOS] += 2.0
    path = tmp_path_factory.mktemp("marian-hf4")
    hf.save_pretrained(path)
    return hf, seqjit.from_hf(path)


def _hf_hypotheses(out, n_src: int, n: int) -> tuple:
    """transformers' sequences (decoder start first, cut at the end token, pad after) as seqjit's ids."""
    ids = []
    for row in out.sequences.tolist():
        row = row[1:]
        row = row[:row.index(EOS)] if EOS in row else row
        while row and row[-1] == PAD:  # pad is never generated (banned): only the batch's filling
            row.pop()
        ids.append(row)
    scores = out.sequences_scores.numpy().astype(np.float64)
    return [ids[i * n:(i + 1) * n] for i in range(n_src)], scores.reshape(n_src, n)


@pytest.mark.parametrize("beams,groups,penalty,n,length_penalty", [
    (4, 2, 0.5, 2, 1.0),
    (6, 3, 1.0, 4, 0.6),
])
def test_group_beam_equals_transformers_4(pair, marian_generate, marian_sources, beams, groups, penalty, n,
                                          length_penalty):
    hf, model = pair
    sources = marian_sources(50, seed=7)
    max_length = 24
    out = marian_generate(hf, sources, num_beams=beams, num_beam_groups=groups, diversity_penalty=penalty,
                          num_return_sequences=n, length_penalty=length_penalty, max_new_tokens=max_length,
                          early_stopping=False, output_scores=True, return_dict_in_generate=True)
    want_ids, want_scores = _hf_hypotheses(out, len(sources), n)
    got = model.generate(sources, beam_size=beams, num_beam_groups=groups, diversity_penalty=penalty,
                         num_hypotheses=n, length_penalty=length_penalty, max_length=max_length, return_scores=True)
    assert [r.ids for r in got] == want_ids
    np.testing.assert_allclose(np.array([r.scores for r in got]), want_scores, rtol=0, atol=1e-4)
    lengths = {len(h) for r in got for h in r.ids}
    assert max_length in lengths and len(lengths) > 5  # finished early and at max_length
    # the groups differ: not every source's hypotheses are one group's beam search repeated
    assert any(len({tuple(h) for h in r.ids}) == n for r in got)
