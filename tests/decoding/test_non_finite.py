"""Non-finite logits and scores (issue 25, item 3): a NaN step raises NonFiniteLogits in every
Python loop (greedy, sampling, beam) instead of emitting index 0 (often the suppressed padding
token); +inf is probability one; a tiny temperature is greedy, not NaN; length penalties are held to
the range where float32 beam scores stay finite and above the beam's -1e9 floor; ``from_torch``
refuses NaN/Inf weights as ``load`` does."""
import math

import numpy as np
import pytest

import seqjit
from seqjit.decoding import DecodingOptions, processors
from seqjit.decoding.inputs import drain
from seqjit.decoding.beam import beam_search
from seqjit.decoding.greedy import greedy_search
from seqjit.errors import ModelFormatError, NonFiniteLogits

PAD, EOS, START, V = 0, 1, 2, 8


class _State:
    def __init__(self, batch):
        self.batch = batch

    def reorder(self, rows, encoder=True):
        self.batch = len(rows)


class _Fixed:
    """A decoder whose every step gives ``row`` as the logits of every row."""
    pad_id, eos_id, decoder_start_id = PAD, EOS, START

    def __init__(self, row):
        self.row = np.asarray(row, np.float32)

    def step(self, state, tokens, with_attention=False, copy=True):
        return np.tile(self.row, (tokens.shape[0], 1))


def _greedy(row, rows=3, **options):
    opts = DecodingOptions(**{"max_length": 4, **options}).validate()
    return drain(greedy_search(_Fixed(row), _State(rows), opts, suppressed=(PAD,), stream=False,
                                need_scores=opts.return_scores))


def _beam(row, rows=2, **options):
    opts = DecodingOptions(**{"max_length": 4, "beam_size": 2, **options}).validate()
    return beam_search(_Fixed(row), _State(rows), opts, suppressed=(PAD,))


NAN_ROW = [0.0, -1.0, 0.5, math.nan, 2.0, 0.1, 0.2, 0.3]


@pytest.mark.parametrize("options", [dict(), dict(return_scores=True), dict(sampling_topk=0, seed=3),
                                     dict(sampling_topk=3, sampling_topp=0.5, seed=3), dict(repetition_penalty=1.3)],
                         ids=["greedy", "greedy-scores", "sampling", "sampling-topk-topp", "penalty"])
def test_a_nan_step_raises_in_the_greedy_and_sampling_loop(options):
    with pytest.raises(NonFiniteLogits, match="step 0: the logits of row 0 hold NaN"):
        _greedy(NAN_ROW, **options)


def test_a_nan_step_raises_in_beam_search():
    with pytest.raises(NonFiniteLogits, match="hold NaN"):
        _beam(NAN_ROW)


def test_nan_from_overflowing_finite_weights_raises_for_sampling_and_beam():
    from seqjit.g2p import G2P

    model = seqjit.load(G2P("gru").directory)
    w = model.weights["decoder.out.weight"]
    w[5, :w.shape[1] // 2], w[5, w.shape[1] // 2:] = 3e38, -3e38  # finite, but the dot product is inf - inf
    # (in the order the one- and two-row kernels sum it; the broadcast kernel of 3+ rows sums the
    # halves' products in another order and reaches +inf, which the rule reads as probability one)
    for options in (dict(sampling_topk=0, seed=1), dict(beam_size=2), dict(callback=lambda token: None)):
        with pytest.raises(NonFiniteLogits):
            model.generate([[5, 6, 7, 8]], max_length=5, **options)


@pytest.mark.parametrize("options", [dict(sampling_topk=0), dict(sampling_topk=4), dict(sampling_topp=0.3),
                                     dict(sampling_temperature=5e-324)])
def test_plus_inf_is_probability_one_when_sampling(options):
    row = [0.5, 1.0, 3.0, 2.0, math.inf, 0.0, -1.0, 1.5]
    for seed in range(5):
        results = _greedy(row, rows=4, seed=seed, **{"sampling_topk": 0, **options})
        assert [r.ids[0] for r in results] == [[4, 4, 4, 4]] * 4


def test_several_plus_inf_share_the_probability():
    row = [math.inf, 0.0, 0.0, math.inf, 0.0, 0.0, math.inf, 0.0]  # the pad token 0 among them: suppressed
    drawn = {t for seed in range(20) for r in _greedy(row, rows=4, seed=seed, sampling_topk=0) for t in r.ids[0]}
    assert drawn == {3, 6}
    logp = processors.log_softmax(np.array([row], np.float32))
    np.testing.assert_array_equal(logp[0], np.where(np.isinf(row), np.log(np.float32(1 / 3)), -np.inf))


def test_a_tiny_temperature_samples_greedily():
    row = [0.5, 1.0, 3.0, 2.0, -0.5, 0.0, -1.0, 1.5]
    for seed in range(5):
        results = _greedy(row, rows=3, seed=seed, sampling_topk=0, sampling_temperature=5e-324, return_scores=True)
        assert [r.ids[0] for r in results] == [[2, 2, 2, 2]] * 3
        assert all(np.isfinite(r.scores[0]) for r in results)


@pytest.mark.parametrize("penalty", [-1e10, -5.0, 50.0, 1e10, 13.0])
def test_length_penalty_outside_the_float32_range_is_refused(penalty):
    with pytest.raises(ValueError, match=r"length_penalty must lie in \[-1.49, 12.5\] with max_length 256"):
        DecodingOptions(beam_size=2, length_penalty=penalty).validate()
    DecodingOptions(beam_size=1, length_penalty=penalty).validate()  # greedy and sampling ignore it


@pytest.mark.parametrize("max_length", [2, 9, 64, 65536])
def test_beam_scores_at_the_ends_of_the_range_stay_finite_and_ranked(max_length):
    from seqjit.decoding.options import length_penalty_range

    row = [0.0, -2.0, 0.5, 1.0, 2.0, 0.1, 0.2, 0.3]  # never ends (eos has the lowest score): full length
    for penalty in length_penalty_range(max_length):
        DecodingOptions(beam_size=2, max_length=max_length, length_penalty=penalty).validate()
        if max_length > 64:
            continue  # too long for the fixed decoder to run
        for r in _beam(row, max_length=max_length, length_penalty=penalty, num_hypotheses=2, return_scores=True):
            assert all(np.isfinite(s) and s > -1e8 for s in r.scores), (penalty, r.scores)
            assert r.scores[0] >= r.scores[1]


def _gru_state_dict():
    import torch

    torch.manual_seed(0)
    nn = torch.nn
    parts = dict(encoder=nn.ModuleDict(dict(embedding=nn.Embedding(11, 6), gru=nn.GRU(6, 8, batch_first=True))),
                 decoder=nn.ModuleDict(dict(embedding=nn.Embedding(13, 6), gru=nn.GRU(6, 8, batch_first=True),
                                            out=nn.Linear(8, 13))))
    return {k: v.numpy().copy() for k, v in nn.ModuleDict(parts).state_dict().items()}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_from_torch_refuses_non_finite_weights_as_load_does(bad):
    ids = dict(pad_id=0, decoder_start_id=1, eos_id=2)
    state = _gru_state_dict()
    seqjit.from_torch(state, arch="rnn_seq2seq", **ids)  # the clean one imports
    state["decoder.out.weight"][3, 4] = bad
    with pytest.raises(ModelFormatError, match=r"tensor 'decoder.out.weight' holds 1 non-finite value"):
        seqjit.from_torch(state, arch="rnn_seq2seq", **ids)
    seqjit.from_torch(state, arch="rnn_seq2seq", allow_nonfinite=True, **ids)
