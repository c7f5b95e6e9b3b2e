"""The CMUdict split, the vocabulary and the error-rate metrics."""
import pytest

from seqjit.g2p import data
from seqjit.g2p.metrics import ErrorRates, closest, edit_distance, error_rates
from seqjit.g2p.vocab import UNK, Vocab


def test_split_is_fixed_disjoint_and_covers_the_dictionary():
    entries = data.load_entries()
    splits = {s: data.load_split(s) for s in data.SPLITS}
    words = {s: {w for w, _ in pairs} for s, pairs in splits.items()}
    assert sum(map(len, words.values())) == len(entries) > 120_000
    assert not (words["train"] & words["test"]) and not (words["train"] & words["dev"]) and not (words["dev"] & words["test"])
    # the documented proportions (90/5/5 by crc32 bucket), within a fraction of a percent
    assert abs(len(words["train"]) / len(entries) - 0.90) < 0.005
    assert abs(len(words["test"]) / len(entries) - 0.05) < 0.005
    assert dict(splits["train"])["hello"] == [("HH", "AH0", "L", "OW1"), ("HH", "EH0", "L", "OW1")]


def test_parse_keeps_alternatives_in_order_and_strips_comments():
    text = "read R EH1 D\nread(2) R IY1 D # verb\n\n'bout B AW1 T\n"
    assert data.parse(text) == {"read": [("R", "EH1", "D"), ("R", "IY1", "D")], "'bout": [("B", "AW1", "T")]}
    with pytest.raises(ValueError, match=r"cmudict\.dict:1: 'orphan' has no pronunciation"):
        data.parse("orphan\n")
    with pytest.raises(ValueError, match="split"):
        data.load_split("validation")


def test_edit_distance_known_values():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], ["A", "B"]) == 2
    assert edit_distance(["A", "B", "C"], ["A", "C"]) == 1
    assert edit_distance(["A"], ["A"]) == 0
    assert closest(["R", "IY1", "D"], [("R", "EH1", "D"), ("R", "IY1", "D")]) == (0, 3)
    with pytest.raises(ValueError, match="references"):
        closest(["A"], [])


def test_error_rates_use_the_closest_pronunciation():
    rates = error_rates([["R", "IY1", "D"], ["K", "AE1"], ["D", "AO1", "G"]],
                        [[("R", "EH1", "D"), ("R", "IY1", "D")], [("K", "AE1", "T")], [("D", "AO1", "G")]])
    assert (rates.words, rates.wrong_words, rates.edits, rates.phonemes) == (3, 1, 1, 9)
    assert rates.wer == pytest.approx(1 / 3) and rates.per == pytest.approx(1 / 9)
    assert ErrorRates().wer == 0.0
    with pytest.raises(ValueError, match="differ in length"):
        error_rates([["A"]], [])


def test_vocab_reports_unknown_characters_and_round_trips(tmp_path):
    vocab = Vocab(list("abc'"), ["AH0", "B"])
    ids, unknown = vocab.encode_word("Ab-é")
    assert ids == [4, 5, UNK, UNK] and unknown == ["-", "é"]
    assert vocab.decode([4, 5, 2, 3]) == ["AH0", "B", "<unk>"]
    vocab.save(tmp_path)
    again = Vocab.load(tmp_path)
    assert (again.graphemes, again.phonemes) == (vocab.graphemes, vocab.phonemes)
    (tmp_path / "g2p.json").write_text("{not json")
    with pytest.raises(ValueError, match="g2p.json"):
        Vocab.load(tmp_path)
    with pytest.raises(ValueError, match="missing"):
        Vocab.load(tmp_path / "nowhere")
