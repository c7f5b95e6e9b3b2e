"""``model.score`` on the GPU (numba's simulator without one): every architecture moved with
``model.to("cuda")`` scores ragged pairs as its CPU path does within 1e-4 (the CPU path
is checked against transformers, CTranslate2 and PyTorch in tests/decoding/test_scoring.py)."""
import numpy as np
import pytest

from .conftest import SOURCES, cuda_or_skip, tiny_models

ARCHS = ["transformer", "rnn_seq2seq", "bahdanau", "luong"]
TARGETS = [[5, 6], []]  # the simulator is slow: two pairs, three positions


@pytest.fixture(scope="module")
def pairs():
    cuda_or_skip()
    cpu, gpu = tiny_models(), tiny_models()
    for name in ARCHS:
        gpu[name].to("cuda")
    return {name: (cpu[name], gpu[name]) for name in ARCHS}


@pytest.mark.parametrize("arch", ARCHS)
def test_score_on_the_device_equals_the_cpu(pairs, arch):
    cpu, gpu = pairs[arch]
    want, got = cpu.score(SOURCES[:2], TARGETS), gpu.score(SOURCES[:2], TARGETS)
    for w, g in zip(want, got):
        assert g.ids == w.ids
        np.testing.assert_allclose(g.log_probs, w.log_probs, atol=1e-4, rtol=0)
