"""Nothing generable on the GPU (numba's simulator without one) raises NothingGenerable as on the CPU
(tests/decoding/test_nothing_generable.py): up front when the options ban every token, and in the
device loops (greedy search, sampling, beam search) when a step's scores are -inf for every token."""
import numpy as np
import pytest

from seqjit.errors import NothingGenerable

from .conftest import SOURCES, VOCAB, cuda_or_skip, tiny_models

# the simulator runs the kernels in Python: a row of only -inf warns in their arithmetic (x - max)
# before the host sees the chosen tokens
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

MODES = {"greedy": dict(), "greedy-scores": dict(return_scores=True), "sampling": dict(sampling_topk=0, seed=1),
         "beam": dict(beam_size=2)}


def _on_device(bias=None):
    cuda_or_skip()
    model = tiny_models()["rnn_seq2seq"]
    if bias is not None:
        model.weights["decoder.out.bias"][:] = bias
    return model.to("cuda")


@pytest.fixture(scope="module")
def gpu():
    return _on_device()


@pytest.mark.parametrize("mode", list(MODES))
def test_every_id_suppressed_raises_up_front(gpu, mode):
    with pytest.raises(NothingGenerable, match="step 0: every token id .*suppress_tokens"):
        gpu.generate(SOURCES, max_length=3, suppress_tokens=list(range(VOCAB)), **MODES[mode])


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("pad_allowed", [False, True])
def test_a_step_with_every_score_minus_inf_raises(mode, pad_allowed):
    """Logits -inf for every token but the padding token (banned), or for every token with the
    padding token allowed (the device argmax then falls back on token 0, which the step allows)."""
    bias = np.full(VOCAB, -np.inf, np.float32)
    if not pad_allowed:
        bias[0] = 0.0
    model = _on_device(bias)
    with pytest.raises(NothingGenerable, match="decoding step 0: row 0 has no token left"):
        model.generate(SOURCES, max_length=3, suppress_pad_token=False if pad_allowed else None, **MODES[mode])


@pytest.mark.parametrize("mode", ["greedy", "beam"])
def test_an_ngram_ban_that_uses_up_the_vocabulary_raises(gpu, mode):
    """16 tokens are neither pad, end nor start: with no token repeated (the start token counts as
    seen) and no end before 20 tokens, step 16 has none left."""
    with pytest.raises(NothingGenerable, match="decoding step 16"):
        gpu.generate(SOURCES[:1], max_length=20, min_length=20, no_repeat_ngram_size=1, **MODES[mode])
