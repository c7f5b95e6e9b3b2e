"""Projected-embedding tables in the native replay (seqjit.graph.input_fold): models whose recurrent
input projections were folded into gathers give the Python replay's ids and logits (the Python
replay runs the graph as written, through the reference kernels), and the fold really happened."""
import numpy as np
import pytest

from seqjit.decoding.api import pad_sources
from seqjit.models.attention_seq2seq import AttentionSeq2SeqConfig, AttentionSeq2SeqModel
from seqjit.models.rnn_seq2seq import RNNSeq2SeqConfig, RNNSeq2SeqModel

CASES = {
    "gru-bidirectional-relu": (RNNSeq2SeqModel, RNNSeq2SeqConfig(
        src_vocab_size=23, tgt_vocab_size=19, hidden_size=24, embed_dim=16, cell="gru", bidirectional=True,
        bridge="linear", bridge_activation="tanh", decoder_input_activation="relu")),
    "lstm-2-layers": (RNNSeq2SeqModel, RNNSeq2SeqConfig(
        src_vocab_size=23, tgt_vocab_size=19, hidden_size=20, embed_dim=12, cell="lstm", num_layers=2)),
    "bahdanau-gru": (AttentionSeq2SeqModel, AttentionSeq2SeqConfig(
        src_vocab_size=23, tgt_vocab_size=19, hidden_size=16, embed_dim=12, cell="gru", bidirectional=True,
        bridge="sum", attention="bahdanau")),
    "luong-lstm": (AttentionSeq2SeqModel, AttentionSeq2SeqConfig(
        src_vocab_size=23, tgt_vocab_size=19, hidden_size=16, embed_dim=12, cell="lstm", attention="general")),
}


def make(case, replay, seed=5):
    cls, config = CASES[case]
    rng = np.random.default_rng(seed)
    weights = {k: (0.4 * rng.standard_normal(s.shape)).astype(np.float32) for k, s in cls.weight_spec(config).items()}
    model = cls(config, weights)
    model.set_replay(replay)
    return model


def sources(rng, vocab, batch):
    return [list(rng.integers(3, vocab, n)) for n in rng.integers(1, 9, batch)]


@pytest.mark.parametrize("batch", [1, 3, 9])  # 9 rows: transposed weight copies in the native kernels
@pytest.mark.parametrize("case", list(CASES))
def test_folded_models_equal_the_python_replay(case, batch):
    native, python = make(case, "native"), make(case, "python")
    rng = np.random.default_rng(batch)
    srcs = sources(rng, native.source_vocab_size, batch)
    ids, lens = pad_sources(srcs, native.pad_id)
    tgt = np.array([[native.decoder_start_id] + list(rng.integers(3, native.target_vocab_size, 5))
                    for _ in srcs], np.int64)
    np.testing.assert_allclose(native.logits_stepwise(ids, tgt, lens), python.logits_stepwise(ids, tgt, lens),
                               rtol=1e-5, atol=1e-5)
    for opts in (dict(max_length=9), dict(max_length=6, beam_size=3, return_scores=True)):
        got, want = native.generate(srcs, **opts), python.generate(srcs, **opts)
        assert [r.ids for r in got] == [r.ids for r in want]


@pytest.mark.parametrize("case", list(CASES))
def test_the_fold_happened_and_the_embedding_no_longer_runs(case):
    model = make(case, "native")
    ids, lens = pad_sources([[3, 4, 5], [6]], model.pad_id)
    encoded = model.encode(ids, lens)
    state = model.start_from(encoded, lens, 4)
    model.step(state, np.full(2, model.decoder_start_id))
    (_, plan, _), = state.leases.values()
    low = plan.native.low
    assert low.folds, "no cell input projection was folded"
    assert all(name != "decoder.embed" for name, _, _ in low.labels)  # gathered by the cell instead
    enc = model.executor("encoder").plan_for({"src_ids": ids, "src_lengths": lens}).native.low
    assert "encoder.rnn" in enc.folds and all(name != "encoder.embed" for name, _, _ in enc.labels)


def test_a_large_vocabulary_is_not_folded():
    cls, config = RNNSeq2SeqModel, RNNSeq2SeqConfig(src_vocab_size=100, tgt_vocab_size=90, hidden_size=8,
                                                    embed_dim=8, cell="gru")
    rng = np.random.default_rng(0)
    weights = {k: rng.standard_normal(s.shape).astype(np.float32) for k, s in cls.weight_spec(config).items()}
    model = cls(config, weights)
    model.set_replay("native")
    ids, lens = pad_sources([[3, 4, 5]], model.pad_id)
    model.encode(ids, lens)
    assert not model.executor("encoder").plan_for({"src_ids": ids, "src_lengths": lens}).native.low.folds


@pytest.mark.parametrize("case", ["gru-bidirectional-relu", "bahdanau-gru"])
def test_an_id_outside_the_vocabulary_is_still_refused(case):
    model = make(case, "native")
    ids, lens = pad_sources([[3, 4, 5]], model.pad_id)
    state = model.start(ids, lens, max_length=4)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 19\)"):
        model.step(state, np.array([19]))
    bad = ids.copy()
    bad[0, 1] = 23
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 23\)"):
        model.encode(bad, lens)
