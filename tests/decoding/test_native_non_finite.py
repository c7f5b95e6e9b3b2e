"""The non-finite rule of the Python loops (test_non_finite.py) holds in the native loops: a NaN step
raises NonFiniteLogits in native greedy search (a runner's batch and a compacted batch), sampling,
streaming and beam search; +inf logits give the Python replay's tokens and scores."""
import numpy as np
import pytest

import seqjit
from seqjit.errors import NonFiniteLogits
from seqjit.g2p import G2P

SOURCES = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]


def _gru(**weights):
    """The bundled G2P GRU with decoder.out weights changed, natively replayed and in Python."""
    path = G2P("gru").directory
    models = []
    for replay in ("native", "python"):
        model = seqjit.load(path, allow_nonfinite=True)
        for name, edit in weights.items():
            edit(model.weights[name])
        model.set_replay(replay)
        models.append(model)
    return models


def _nan(b):
    b[5] = np.nan  # NaN logits for token 5 in every row, whatever order a kernel sums in


@pytest.mark.parametrize("options", [dict(), dict(return_scores=True), dict(sampling_topk=0, seed=1),
                                     dict(sampling_topk=5, seed=2), dict(beam_size=3), dict(beam_size=2, num_hypotheses=2)],
                         ids=["greedy", "greedy-scores", "sampling", "topk", "beam3", "beam2"])
@pytest.mark.parametrize("rows", [1, 20])
def test_a_nan_step_raises_natively(options, rows):
    native, python = _gru(**{"decoder.out.bias": _nan})
    sources = (SOURCES * 7)[:rows]
    for model in (native, python):
        with pytest.raises(NonFiniteLogits, match="hold NaN"):
            model.generate(sources, max_length=5, **options)


def test_a_nan_step_raises_while_streaming():
    native, _ = _gru(**{"decoder.out.bias": _nan})
    with pytest.raises(NonFiniteLogits, match="hold NaN"):
        list(native.generate_stream(SOURCES[0], max_length=5))


def _plus_inf(b):
    b[[7, 9]] = np.inf


@pytest.mark.parametrize("options", [dict(return_scores=True), dict(sampling_topk=0, seed=4, return_scores=True),
                                     dict(beam_size=3, return_scores=True, num_hypotheses=2)],
                         ids=["greedy", "sampling", "beam"])
def test_plus_inf_gives_the_python_replays_results(options):
    native, python = _gru(**{"decoder.out.bias": _plus_inf})
    for rows in (1, 20):
        sources = (SOURCES * 7)[:rows]
        got, want = native.generate(sources, max_length=5, **options), python.generate(sources, max_length=5, **options)
        assert [r.ids for r in got] == [r.ids for r in want]
        assert all(set(h) <= {7, 9} for r in got for h in r.ids), "only the +inf tokens can be chosen"
        np.testing.assert_allclose([r.scores for r in got], [r.scores for r in want], rtol=1e-5)
