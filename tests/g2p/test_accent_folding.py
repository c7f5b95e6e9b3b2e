"""G2P reads a letter it does not know without its accents (NFKD, combining marks dropped)."""
import pytest

from seqjit.cli import main
from seqjit.g2p import G2P
from seqjit.g2p.vocab import UNK, Vocab, without_accents


def test_without_accents():
    assert without_accents("Crème Brûlée") == "Creme Brulee"
    assert without_accents("naïve cafe\u0301") == "naive cafe"  # precomposed and combining accents
    assert without_accents("ﬁancé") == "fiance"  # compatibility ligature
    assert without_accents("Straße øre") == "Straße øre"  # letters with no decomposition stay


def test_vocab_spell_folds_only_letters_the_model_does_not_know():
    vocab = Vocab(list("acefi"), ["X"])  # ids: a 4, c 5, e 6, f 7, i 8
    assert vocab.spell("Café") == ([5, 4, 7, 6], [], "cafe")
    assert vocab.spell("cafe\u0301") == ([5, 4, 7, 6], [], "cafe")
    assert vocab.spell("ﬁ") == ([7, 8], [], "fi")
    assert vocab.spell("ßa") == ([UNK, 4], ["ß"], "ßa")
    assert vocab.spell("Café", fold_accents=False) == ([5, 4, 7, UNK], ["é"], "café")
    french = Vocab(list("acefé"), ["X"])  # a model that knows é keeps it
    assert french.spell("café") == ([5, 4, 7, 8], [], "café")


@pytest.fixture(scope="module")
def attention():
    return G2P("attention")


def test_predict_reads_cafe_with_an_accent_as_cafe(attention):
    accented, nfd, plain = attention.predict(["café", "cafe\u0301", "CAFÉ"])
    reference = attention.predict(["cafe"])[0]
    for p in (accented, nfd, plain):
        assert (p.phonemes, p.unknown, p.spelled) == (reference.phonemes, [], "cafe")
        assert p.score == pytest.approx(reference.score)
    assert accented.word == "café"


def test_fold_accents_can_be_turned_off(attention):
    raw = G2P("attention", fold_accents=False).predict(["café"])[0]
    assert raw.unknown == ["é"] and raw.spelled == "café"
    assert raw.phonemes != attention.predict(["cafe"])[0].phonemes  # the bundled model reads <unk> differently


def test_command_line_folds_silently_and_reports_with_the_option_off(capsys):
    assert main(["g2p", "--model", "attention", "café"]) == 0
    out, err = capsys.readouterr()
    assert out == f"café\t{' '.join(G2P('attention').predict(['cafe'])[0].phonemes)}\n" and err == ""
    assert main(["g2p", "--model", "attention", "--no-fold-accents", "café"]) == 0
    out, err = capsys.readouterr()
    assert "seqjit: <argv>:1: 'café' has character(s) 'é' the model does not know; read as <unk>" in err
    assert "accents folded" not in err
