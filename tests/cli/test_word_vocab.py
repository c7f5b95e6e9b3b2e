"""``word_vocab.json`` (a toolkit's token lists, :mod:`seqjit.text.word_vocab`): malformed files and
vocabularies of another model are refused by name before anything is translated; the tokenisers
split and join as documented (JoeyNMT's and OpenNMT-py's own pipelines are checked against in
``test_toolkit_text.py``, marked ``toolkit``)."""
import json
from types import SimpleNamespace

import pytest

from seqjit.errors import ModelFormatError
from seqjit.text.translation import codec_for

MODEL = SimpleNamespace(source_vocab_size=6, target_vocab_size=6, pad_id=1, decoder_start_id=2, eos_id=3)
GOOD = {"format": "seqjit word vocab 1", "source": ["<unk>", "<pad>", "<s>", "</s>", "a", "b"],
        "target": ["<unk>", "<pad>", "<s>", "</s>", "x", "\u2581"], "tokenizer": "word", "lowercase": True,
        "source_eos": True, "unk": "<unk>"}


def codec(tmp_path, **change):
    (tmp_path / "word_vocab.json").write_text(json.dumps({**GOOD, **change}), encoding="utf-8")
    return codec_for(tmp_path, MODEL)


def test_word_and_char_tokens(tmp_path):
    c = codec(tmp_path)
    assert c.encode("A  b zz") == [4, 5, 0, 3]  # lower-cased, whitespace split, unknown -> <unk>, end token
    assert c.decode([4, 0, 1, 2, 4, 3]) == "x <unk> x"  # pad, start and end dropped; <unk> kept
    c = codec(tmp_path, tokenizer="char", lowercase=False, source_eos=False)
    assert c.encode("ab a") == [4, 5, 0, 4]  # the space is "\u2581", not in the source list here
    assert c.decode([4, 5, 4]) == "x x"


@pytest.mark.parametrize("change,match", [
    (dict(format="other"), "not a seqjit word vocabulary"), (dict(source=[]), "'source' must be a non-empty list"),
    (dict(target=["a", "a"]), "'target' lists a token twice"), (dict(tokenizer="bpe"), "'tokenizer' must be one of"),
    (dict(source_eos="yes"), "'source_eos' must be true or false"),
    (dict(source=GOOD["source"][:5]), "the source vocabulary has 5 tokens, the model's 6"),
])
def test_bad_files_are_refused_by_name(tmp_path, change, match):
    with pytest.raises(ModelFormatError, match=match) as info:
        codec(tmp_path, **change)
    assert "word_vocab.json" in str(info.value)
