"""``generate`` frictions of issue 25, item 5: options must be real bools, the Hugging Face names get
a "did you mean", one flat source is told to be wrapped in a list, and a mapping, a set or an empty
array of sources is refused with a clear error (no raw KeyError or graph ShapeError)."""
import numpy as np
import pytest

from seqjit.g2p import G2P


@pytest.fixture(scope="module")
def model():
    return G2P("gru").model


@pytest.mark.parametrize("name", ["return_scores", "return_attention"])
@pytest.mark.parametrize("value", ["no", "false", 1, 0, None, [True]])
def test_flags_must_be_real_bools(model, name, value):
    with pytest.raises(ValueError, match=f"{name} must be True or False"):
        model.generate([[5, 6]], max_length=3, **{name: value})


def test_numpy_bools_are_bools(model):
    assert model.generate([[5, 6]], max_length=3, return_scores=np.True_)[0].scores is not None


@pytest.mark.parametrize("given,meant", [("num_beams", "beam_size"), ("top_k", "sampling_topk"),
                                         ("top_p", "sampling_topp"), ("temperature", "sampling_temperature"),
                                         ("max_new_tokens", "max_length"), ("num_return_sequences", "num_hypotheses"),
                                         ("beam_sise", "beam_size"), ("max_lenght", "max_length")])
def test_unknown_options_say_what_they_probably_mean(model, given, meant):
    with pytest.raises(TypeError, match=rf"unknown decoding option\(s\) '{given}' \(did you mean {meant}"):
        model.generate([[5, 6]], **{given: 2})


@pytest.mark.parametrize("sources", [[12, 7, 99, 0], np.array([12, 7, 99, 0]), (12, 7, 99, 0),
                                     [np.int64(12), 7, 99, 0]])
def test_one_flat_source_is_told_to_be_wrapped(model, sources):
    with pytest.raises(TypeError, match=r"wrap it in a list: generate\(model, \[\[12, 7, 99, 0\]\]\)"):
        model.generate(sources)


def test_a_long_flat_source_is_shown_short(model):
    with pytest.raises(TypeError, match=r"wrap it in a list: generate\(model, \[\[3, 4, 5, 6, 7, 8, 9, 10, \.\.\.\]\]\)$"):
        model.generate(list(range(3, 10_000)))


@pytest.mark.parametrize("sources,kind", [({1: [5, 6]}, "dict"), ({(5, 6)}, "set"), (frozenset([(5,)]), "frozenset")])
def test_mappings_and_sets_are_refused(model, sources, kind):
    with pytest.raises(TypeError, match=f"sources must be a list of token-id sequences, got {kind}"):
        model.generate(sources)


def test_an_empty_array_of_sources_is_refused(model):
    with pytest.raises(ValueError, match="sources is empty"):
        model.generate(np.zeros((0, 3), np.int64))


@pytest.mark.parametrize("name", ["attention", "transformer"])
@pytest.mark.parametrize("beam", [1, 3])
def test_attention_has_the_same_shape_batched_and_alone(name, beam):
    model = G2P(name).model
    sources = [[5, 6, 7, 8, 9, 10], [5, 6], [7]]
    batched = model.generate(sources, max_length=8, return_attention=True, beam_size=beam)
    for src, got in zip(sources, batched):
        alone = model.generate([src], max_length=8, return_attention=True, beam_size=beam)[0]
        assert got.ids == alone.ids
        for a, b in zip(got.attention, alone.attention):
            assert a.shape == b.shape and a.shape[-1] == len(src)
            np.testing.assert_allclose(a, b, atol=1e-5)
