"""Decoding with nothing generable raises NothingGenerable on every path, instead of returning a
banned token (the padding id, scored NaN) or an empty beam hypothesis at -1e9:

- up front, when the options alone ban every token at a step every decode reaches (every id
  suppressed; bad words and min_length together; begin_suppress_tokens on the first step);
- in the loops (Python and native greedy search, sampling, streaming, beam search), when a row's
  processed scores are -inf for every token: the model's logits -inf for every unbanned token, or a
  no-repeat n-gram ban that has used up the vocabulary.
The GPU path (numba's simulator here) is tested in tests/gpu/test_nothing_generable_on_device.py."""
import numpy as np
import pytest

import seqjit
from seqjit.errors import NothingGenerable
from seqjit.g2p import G2P

SOURCES = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]
V, PAD, EOS = 73, 0, 2  # the bundled G2P GRU's target vocabulary and special ids
MODES = {"greedy": dict(), "greedy-scores": dict(return_scores=True), "sampling": dict(sampling_topk=0, seed=1),
         "topk": dict(sampling_topk=5, seed=2), "beam": dict(beam_size=3),
         "beam-2": dict(beam_size=2, num_hypotheses=2)}


def _gru(replay, bias=None):
    model = seqjit.load(G2P("gru").directory, allow_nonfinite=True)
    if bias is not None:
        model.weights["decoder.out.bias"][:] = bias
    model.set_replay(replay)
    return model


@pytest.fixture(scope="module", params=["native", "python"])
def model(request):
    return _gru(request.param)


BANS = {
    "every-id-suppressed": (dict(suppress_tokens=list(range(V))), "suppress_tokens"),
    "bad-words-and-min-length": (dict(bad_words_ids=[[t] for t in range(V) if t != EOS], min_length=2),
                                 "bad_words_ids.*min_length 2"),
    "begin-suppress": (dict(suppress_tokens=[t for t in range(V) if t != EOS], begin_suppress_tokens=[EOS]),
                       "begin_suppress_tokens"),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("ban", list(BANS))
@pytest.mark.parametrize("rows", [1, 20])
def test_options_that_ban_every_token_raise_up_front(model, ban, mode, rows):
    options, names = BANS[ban]
    with pytest.raises(NothingGenerable, match=f"step 0: every token id .*banned by .*{names}"):
        model.generate((SOURCES * 7)[:rows], max_length=5, **options, **MODES[mode])


def test_the_stream_raises_up_front(model):
    with pytest.raises(NothingGenerable, match="suppress_tokens"):
        list(model.generate_stream(SOURCES[0], max_length=5, suppress_tokens=list(range(V))))


def test_one_token_left_still_decodes(model):
    """Not an error while a token is left: all but token 7 suppressed (the end token too) gives 7s."""
    for mode in ("greedy", "sampling", "beam"):
        got = model.generate(SOURCES, max_length=4, suppress_tokens=[t for t in range(V) if t != 7], **MODES[mode])
        assert [r.ids[0] for r in got] == [[7] * 4] * 3


def _only_pad(replay):
    """Logits -inf for every token but the padding token, which is banned: nothing left at step 0."""
    bias = np.full(V, -np.inf, np.float32)
    bias[PAD] = 0.0
    return _gru(replay, bias)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("rows", [1, 20])
@pytest.mark.parametrize("replay", ["native", "python"])
def test_a_step_with_every_score_minus_inf_raises(replay, mode, rows):
    model = _only_pad(replay)
    with pytest.raises(NothingGenerable, match="decoding step 0: row 0 has no token left"):
        model.generate((SOURCES * 7)[:rows], max_length=5, **MODES[mode])


@pytest.mark.parametrize("replay", ["native", "python"])
def test_minus_inf_logits_raise_with_the_pad_token_allowed(replay):
    """Every logit -inf and nothing banned: the argmax's first index would be taken as an answer."""
    model = _gru(replay, np.full(V, -np.inf, np.float32))
    for mode in ("greedy", "sampling", "beam"):
        with pytest.raises(NothingGenerable, match="no token left"):
            model.generate(SOURCES, max_length=5, suppress_pad_token=False, **MODES[mode])


@pytest.mark.parametrize("replay", ["native", "python"])
@pytest.mark.parametrize("sampling", [False, True])
def test_a_stream_step_with_every_score_minus_inf_raises(replay, sampling):
    model = _only_pad(replay)
    with pytest.raises(NothingGenerable, match="no token left"):
        list(model.generate_stream(SOURCES[0], max_length=5, **(MODES["sampling"] if sampling else {})))


@pytest.mark.parametrize("mode", ["greedy", "beam", "sampling"])
def test_an_ngram_ban_that_uses_up_the_vocabulary_raises(model, mode):
    """No repeated token (the start token counts as seen) and no end before 80 tokens: the 70
    tokens that are neither pad, end nor start run out at step 70."""
    with pytest.raises(NothingGenerable, match="decoding step 70"):
        model.generate(SOURCES[:1], max_length=80, min_length=80, no_repeat_ngram_size=1, **MODES[mode])
