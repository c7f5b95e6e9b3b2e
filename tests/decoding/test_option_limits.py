"""Decode options and inputs that are refused (or capped) before anything is decoded or allocated.

Tiny random-weight models: a Transformer with a 12-position table and an RNN (no position limit).
"""
import dataclasses
import math
import pydoc
import warnings

import numpy as np
import pytest

import seqjit
from seqjit.decoding import DecodingOptions, generate, generate_stream
from seqjit.decoding.options import MAX_LENGTH_LIMIT
from seqjit.models.rnn_seq2seq import RNNSeq2SeqConfig, RNNSeq2SeqModel
from seqjit.models.transformer import TransformerConfig, TransformerModel

POSITIONS = 12


def _weights(cls, cfg, seed=0):
    rng = np.random.default_rng(seed)
    return {n: (rng.standard_normal(s.shape) * 0.5).astype(np.float32) for n, s in cls.weight_spec(cfg).items()}


@pytest.fixture(scope="module")
def transformer():
    """A Transformer that never emits its end token (the end token's output row is zero and the
    others large), so decoding always runs to max_length."""
    cfg = TransformerConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=8, encoder_layers=1, decoder_layers=1,
                            encoder_heads=2, decoder_heads=2, encoder_ffn_dim=12, decoder_ffn_dim=12,
                            positions="learned", max_positions=POSITIONS, tie_output=False, final_logits_bias=True)
    weights = _weights(TransformerModel, cfg)
    weights["lm_head.weight"][cfg.eos_id] = 0
    weights["final_logits_bias"][:] = 0
    weights["final_logits_bias"][cfg.eos_id] = -1e4
    return TransformerModel(cfg, weights)


@pytest.fixture(scope="module")
def rnn():
    cfg = RNNSeq2SeqConfig(src_vocab_size=11, tgt_vocab_size=11, hidden_size=8)
    return RNNSeq2SeqModel(cfg, _weights(RNNSeq2SeqModel, cfg))


# -- item 4: non-finite and out-of-range float options -----------------------------------------
@pytest.mark.parametrize("name", ["sampling_temperature", "length_penalty", "repetition_penalty", "sampling_topp"])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_float_options_are_refused_by_name(rnn, name, value):
    with pytest.raises(ValueError, match=f"{name} must be a finite number"):
        DecodingOptions(**{name: value}).validate()
    extra = dict(sampling_topk=0) if name.startswith("sampling") else dict(beam_size=2)
    with pytest.raises(ValueError, match=name):
        rnn.generate([[3, 4]], **extra, **{name: value})


def test_every_float_option_is_checked_for_finiteness():
    floats = [f.name for f in dataclasses.fields(DecodingOptions) if f.type == "float"]
    assert sorted(floats) == sorted(["length_penalty", "repetition_penalty", "sampling_topp", "sampling_temperature",
                                    "min_alternative_expansion_prob", "diversity_penalty"])
    for name in floats:
        with pytest.raises(ValueError, match=name):
            DecodingOptions(**{name: math.nan}).validate()


def test_finite_float_options_still_decode(rnn):
    out = rnn.generate([[3, 4]], beam_size=2, length_penalty=-0.5, max_length=5)
    assert len(out) == 1 and len(out[0].ids[0]) <= 5


# -- item 8: max_length against the model's positions, and huge lengths -----------------------
def test_explicit_max_length_above_the_positions_is_refused(transformer):
    with pytest.raises(ValueError, match=f"max_length 13 exceeds the model's {POSITIONS} positions"):
        transformer.generate([[5, 3]], max_length=POSITIONS + 1)
    with pytest.raises(ValueError, match=f"exceeds the model's {POSITIONS} positions"):
        list(transformer.generate_stream([5, 3], max_length=100))


def test_default_max_length_is_capped_to_the_positions(transformer):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (result,) = transformer.generate([[5, 3]])
        tokens = list(transformer.generate_stream([5, 3]))
    assert len(result.ids[0]) == POSITIONS  # the model never ends: decoding stops at its positions
    assert len(tokens) == POSITIONS and tokens[-1].is_last
    assert len(transformer.generate([[5, 3]], max_length=POSITIONS)[0].ids[0]) == POSITIONS
    beam = transformer.generate([[5, 3]], beam_size=2, num_hypotheses=2)
    assert all(len(ids) == POSITIONS for ids in beam[0].ids)


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_huge_max_length_is_refused_before_allocating(request, arch):
    model = request.getfixturevalue(arch)
    for call in (lambda: model.generate([[5, 3]], max_length=10**7),
                 lambda: list(model.generate_stream([5, 3], max_length=10**7)),
                 lambda: model.generate([[5, 3]], beam_size=4, max_length=10**7)):
        with pytest.raises(ValueError, match="max_length"):
            call()
    with pytest.raises(ValueError, match=f"more than seqjit decodes \\({MAX_LENGTH_LIMIT} tokens\\)"):
        model.generate([[5, 3]], max_length=MAX_LENGTH_LIMIT + 1)


def test_rnn_has_no_position_limit(rnn):
    assert len(rnn.generate([[5, 3]], max_length=300, min_length=300)[0].ids[0]) == 300


def test_a_decoder_state_larger_than_memory_is_refused(monkeypatch):
    """A Transformer without a position table: the KV cache for max_length is estimated first."""
    cfg = TransformerConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=8, encoder_layers=1, decoder_layers=1,
                            encoder_heads=2, decoder_heads=2, encoder_ffn_dim=12, decoder_ffn_dim=12, positions="none")
    model = TransformerModel(cfg, _weights(TransformerModel, cfg))
    from seqjit.decoding import limits

    # 2 (K and V) x 8 (d_model) x 4 bytes x 1000 tokens = 64,000 bytes per row; 3 sources x 2 beams
    monkeypatch.setattr(limits, "_memory_limit", 6 * 64_000 - 1)
    with pytest.raises(ValueError, match=r"decoding 6 rows \(batch x beam\) at max_length 1000 needs .* GiB \(decoder state"):
        model.generate([[5, 3]] * 3, beam_size=2, max_length=1000)
    model.generate([[5, 3]] * 3, beam_size=1, max_length=1000, max_batch_size=2)  # 2 rows fit


# -- item 12: ragged nested sources ------------------------------------------------------------
@pytest.mark.parametrize("sources,index", [([[1, 2], [3, [4]]], 1), ([[[1, 2], [3]]], 0)])
def test_ragged_nested_source_names_the_source(rnn, sources, index):
    with pytest.raises(TypeError, match=rf"sources\[{index}\] must be a flat sequence"):
        generate(rnn, sources)


def test_ragged_stream_source_is_named(rnn):
    with pytest.raises(TypeError, match=r"sources\[0\]"):
        list(generate_stream(rnn, [3, [4, 5]]))


# -- item 12: thread counts ----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, 1.5, math.nan, math.inf, True, "2", [1]])
def test_bad_thread_counts_give_a_clear_error(bad):
    before = seqjit.get_num_threads()
    with pytest.raises((ValueError, TypeError), match="num_threads must be a positive integer"):
        seqjit.set_num_threads(bad)
    assert seqjit.get_num_threads() == before


def test_numpy_integer_thread_count_is_accepted():
    try:
        assert seqjit.set_num_threads(np.int64(1)) == 1
    finally:
        seqjit.set_num_threads(None)


# -- item 17: the options are documented where users look ----------------------------------------
@pytest.mark.parametrize("where", ["model", "function", "stream"])
def test_help_lists_every_decoding_option_with_its_default(rnn, where):
    func = {"model": rnn.generate, "function": generate, "stream": generate_stream}[where]
    text = pydoc.render_doc(func, renderer=pydoc.plaintext)
    for f in dataclasses.fields(DecodingOptions):
        assert f"{f.name}={f.default!r}" in text, f"{f.name}={f.default!r} missing from help({where})"
