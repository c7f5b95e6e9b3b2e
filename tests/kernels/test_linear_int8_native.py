"""linear_int8 in the native replay (kernels/linear_int8/_native.pxi): a decode step's products (up to 4
rows) split in two column halves over the team of two at 2 threads give bit for bit the single-thread
logits and tokens of an int8 model; the native replay equals the Python executor's replay."""
import numpy as np
import pytest

import seqjit


@pytest.fixture(scope="module")
def int8_marian(make_tiny_marian, tmp_path_factory):
    # d_model 128: the step's products (1-3 rows x 128 x 128 and up) are large enough for the team
    path = tmp_path_factory.mktemp("int8_team")
    make_tiny_marian(seed=12, d_model=128, encoder_ffn_dim=256, decoder_ffn_dim=256).save_pretrained(path)
    model = seqjit.quantize(seqjit.from_hf(path), "int8")
    model.set_replay("native")
    return model


def test_int8_step_on_the_team_equals_one_thread(int8_marian, team_logits):
    one, (ids, tgt, lens) = team_logits(int8_marian)
    int8_marian.set_replay("python")
    try:
        np.testing.assert_allclose(int8_marian.logits_stepwise(ids, tgt, lens), one, rtol=1e-5, atol=1e-5)
    finally:
        int8_marian.set_replay("native")


def test_int8_greedy_at_two_threads_equals_one_thread(int8_marian, with_threads, marian_sources):
    srcs = marian_sources(5, seed=1)
    one = with_threads(1, lambda: [int8_marian.generate([s], max_length=12)[0].ids for s in srcs])
    two = with_threads(2, lambda: [int8_marian.generate([s], max_length=12)[0].ids for s in srcs])
    assert two == one
