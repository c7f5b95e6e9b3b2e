"""``generate`` has a real signature (every decoding option a keyword-only parameter with its default,
visible to an IDE and to ``inspect``), and any other keyword is an UnknownOptionError that names the
seqjit option a Hugging Face ``generate`` argument corresponds to, or says seqjit has none."""
import dataclasses
import inspect
import re

import pytest

from seqjit.decoding import DecodingOptions, generate, generate_stream
from seqjit.decoding.options import HF_NAMES
from seqjit.errors import UnknownOptionError
from seqjit.models.base import Seq2SeqModel

FIELDS = dataclasses.fields(DecodingOptions)
CALL = ["lengths", "max_batch_size", "callback"]


@pytest.fixture(scope="module")
def model():
    from seqjit.g2p import G2P

    return G2P("transformer").model  # 128 positions: fewer than the default max_length


@pytest.mark.parametrize("function, skip, call", [
    (generate, ["model", "sources"], CALL), (Seq2SeqModel.generate, ["self", "sources"], CALL),
    (generate_stream, ["model", "source"], []), (Seq2SeqModel.generate_stream, ["self", "source"], [])])
def test_every_option_is_a_keyword_parameter_with_its_default(function, skip, call):
    params = list(inspect.signature(function).parameters.values())
    assert [p.name for p in params[:2]] == skip and params[-1].kind is inspect.Parameter.VAR_KEYWORD
    keywords = params[2:-1]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in keywords)
    assert [p.name for p in keywords] == call + [f.name for f in FIELDS]
    for p, field in zip(keywords[len(call):], FIELDS):
        assert p.default == field.default and type(p.default) is not str, p.name
        assert p.annotation != inspect.Parameter.empty, p.name


@pytest.mark.parametrize("method, function", [(Seq2SeqModel.generate, generate),
                                              (Seq2SeqModel.generate_stream, generate_stream)])
def test_the_method_and_the_function_take_the_same_arguments(method, function):
    ours = list(inspect.signature(method).parameters.values())[1:]
    theirs = list(inspect.signature(function).parameters.values())[1:]
    assert ours == theirs


def test_the_stream_refuses_a_hugging_face_name_too(model):
    with pytest.raises(UnknownOptionError, match=r"'top_k' \(did you mean sampling_topk\?\)"):
        next(model.generate_stream([5, 6], top_k=3))
    streamed = [t.token for t in model.generate_stream([5, 6], max_length=4)]
    ids = model.generate([[5, 6]], max_length=4)[0].ids[0]
    assert ids and streamed[:len(ids)] == ids  # the stream also yields the end token when it comes


def test_the_default_max_length_is_lowered_to_the_positions_an_explicit_one_is_not(model):
    assert model.config.max_positions < DecodingOptions.max_length
    assert model.generate([[5, 6]])[0].ids  # the default: lowered to 128
    with pytest.raises(ValueError, match="max_length 256 exceeds the model's 128 positions"):
        model.generate([[5, 6]], max_length=256)
    with pytest.raises(ValueError, match="max_length must be an integer >= 1, got None"):
        model.generate([[5, 6]], max_length=None)


def test_explicit_defaults_decode_as_no_arguments(model):
    given = {f.name: f.default for f in FIELDS if f.name != "max_length"}
    assert [r.ids for r in model.generate([[5, 6], [7]], **given)] == [r.ids for r in model.generate([[5, 6], [7]])]


@pytest.mark.parametrize("name", sorted(HF_NAMES))
def test_each_hugging_face_name_says_what_to_write_instead(model, name):
    with pytest.raises(UnknownOptionError) as caught:
        model.generate([[5, 6]], **{name: 1})
    message = str(caught.value)
    assert isinstance(caught.value, TypeError) and f"'{name}'" in message
    meant = HF_NAMES[name]
    if meant.startswith("no equivalent"):
        assert f"seqjit has {meant}" in message
        return
    assert f"did you mean {meant}?" in message
    first = re.match(r"\w+", meant).group(0)  # the seqjit name it points to is real
    known = {f.name for f in FIELDS} | set(CALL) | {"sources", "generate_stream"}
    assert first in known, (name, meant)
