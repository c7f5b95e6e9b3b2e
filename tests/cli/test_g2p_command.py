"""``seqjit g2p``: stdin, --version/--threads, too-long words, --format json, tabs, truncation, stderr."""
import importlib.metadata
import json
import re
import sys

import pytest

import seqjit
from seqjit.g2p import G2P


def _tsv(predictions):
    return "".join(f"{p.word}\t{' '.join(p.phonemes)}\n" for p in predictions)


# -- item 14: --version, --threads anywhere, stdin ---------------------------------------------------
def test_version(capsys):
    from seqjit.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"seqjit {importlib.metadata.version('seqjit')}\n"


@pytest.mark.parametrize("where", ["before", "after"])
def test_threads_before_or_after_the_subcommand(cli, monkeypatch, where):
    calls = []
    monkeypatch.setattr(seqjit, "set_num_threads", calls.append)
    argv = ["--threads", "1", "g2p", "--no-lexicon", "--model", "gru", "hello"] if where == "before" else \
        ["g2p", "--no-lexicon", "--model", "gru", "hello", "--threads", "1"]
    code, out, err = cli(*argv)
    assert code == 0, err
    assert calls == [1] and out == _tsv(G2P("gru").predict(["hello"]))


@pytest.mark.parametrize("argv", [["--threads", "0", "g2p", "hello"], ["g2p", "hello", "--threads", "-2"]])
def test_threads_must_be_positive(cli, argv):
    with pytest.raises(SystemExit) as stop:
        cli(*argv)
    assert stop.value.code == 2


@pytest.mark.parametrize("words", [[], ["-"]])
def test_g2p_reads_stdin_without_words_or_with_a_dash(cli, words):
    code, out, err = cli("g2p", "--no-lexicon", "--model", "gru", *words, stdin=b"hello\n\nworld\n")
    assert code == 1
    good = G2P("gru").predict(["hello", "world"])
    assert out.split("\n") == [_tsv(good[:1]).rstrip("\n"), "", _tsv(good[1:]).rstrip("\n"), ""]
    assert "seqjit: <stdin>:2: empty line (no word)" in err
    code, _, err = cli("g2p", "--model", "gru", "-", "hello", stdin=b"x\n")
    assert code == 2 and "cannot be combined" in err


# -- item 7: a word longer than the model's positions --------------------------------------------------
def test_too_long_word_gets_an_empty_line_and_the_run_goes_on(cli, tmp_path):
    words = ["hello", "a" * 200, "world", "b" * 129, "c" * 128]
    src, dst = tmp_path / "words.txt", tmp_path / "out.txt"
    src.write_text("".join(w + "\n" for w in words), encoding="utf-8")
    code, _, err = cli("g2p", "--no-lexicon", "--model", "transformer", "--input", src, "--output", dst, "--quiet")
    assert code == 1
    lines = dst.read_text(encoding="utf-8").split("\n")
    assert len(lines) == len(words) + 1 and lines[1] == lines[3] == ""
    good = G2P("transformer").predict(["hello", "world", "c" * 128])
    assert [lines[0], lines[2], lines[4]] == _tsv(good).splitlines()
    assert f"seqjit: {src}:2: the word has 200 letters, more than the model's 128 positions" in err
    assert f"seqjit: {src}:4: the word has 129 letters" in err
    assert "seqjit: 2 of 5 line(s) could not be pronounced" in err


def test_predict_checks_the_word_length_and_caps_the_default_max_length():
    g2p = G2P("transformer")
    with pytest.raises(ValueError, match=r"words\[1\]: the word has 129 letters, more than the model's 128 positions"):
        g2p.predict(["ok", "x" * 129])
    long = g2p.predict(["abc" * 40])[0]  # 120 letters: 2 x 120 + 4 phonemes would pass the 128 positions
    assert 0 < len(long.phonemes) <= 128
    with pytest.raises(ValueError, match="max_length 129 exceeds the model's 128 positions"):
        g2p.predict(["ok"], max_length=129)


# -- item 15: --format json, tabs, truncation ------------------------------------------------------------
def test_json_lines_hold_word_phonemes_score_and_the_n_best(cli):
    words = ["hello", "seqjit"]
    code, out, err = cli("g2p", "--no-lexicon", "--model", "attention", "--format", "json", "--beam-size", 4, "--num-hypotheses", 3,
                         *words)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    expected = G2P("attention").predict(words, beam_size=4, num_hypotheses=3)
    assert [r["word"] for r in rows] == words
    for row, want in zip(rows, expected):
        assert set(row) == {"word", "phonemes", "score", "normalized_score", "hypotheses", "unknown", "truncated",
                            "source", "error"}
        assert row["source"] == "model"
        # beam search ranks by the normalized score (issue 25: score is the sum of log-probabilities)
        assert row["phonemes"] == want.phonemes and row["normalized_score"] == pytest.approx(want.score)
        assert len(row["hypotheses"]) == 3 and row["hypotheses"][0]["phonemes"] == row["phonemes"]
        scores = [h["normalized_score"] for h in row["hypotheses"]]
        assert scores == sorted(scores, reverse=True) and len({" ".join(h["phonemes"]) for h in row["hypotheses"]}) == 3
        assert row["error"] is None and row["truncated"] is False and row["unknown"] == []
    code, _, err = cli("g2p", "--model", "gru", "--num-hypotheses", 2, "--beam-size", 2, "hello")
    assert code == 2 and "--format json" in err


def test_json_bad_line_is_an_object_with_its_error(cli, tmp_path):
    src = tmp_path / "w.txt"
    src.write_bytes(b"hello\n\xff\n\n")
    code, out, _ = cli("g2p", "--no-lexicon", "--model", "gru", "--format", "json", "--input", src)
    assert code == 1
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 3 and rows[0]["error"] is None
    assert rows[1]["word"] is None and "not valid utf-8" in rows[1]["error"] and rows[1]["phonemes"] is None
    assert rows[2]["word"] == "" and rows[2]["error"] == "empty line (no word)"


def test_a_tab_ends_the_word(cli, tmp_path):
    src = tmp_path / "lexicon.tsv"
    src.write_text("hello\tHH AH0 L OW1\n\tno word\nworld\n", encoding="utf-8")
    code, out, err = cli("g2p", "--no-lexicon", "--model", "gru", "--input", src)
    assert code == 1
    good = G2P("gru").predict(["hello", "world"])
    assert out.split("\n") == [_tsv(good[:1]).rstrip("\n"), "", _tsv(good[1:]).rstrip("\n"), ""]
    assert all(line.count("\t") <= 1 for line in out.splitlines())
    assert f"seqjit: {src}:2: no word before the tab" in err


def test_output_cut_short_by_max_length_is_a_warning(cli):
    code, out, err = cli("g2p", "--no-lexicon", "--model", "gru", "--max-length", 2, "--format", "json", "hello", "a")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(G2P("gru").predict(["hello"])[0].phonemes) > 2  # without the limit 'hello' has more phonemes
    assert rows[0]["truncated"] is True and len(rows[0]["phonemes"]) == 2
    assert "seqjit: <argv>:1: warning: the phonemes of 'hello' were cut short" in err
    a = G2P("gru").predict(["a"])[0].phonemes  # the model's own reading, not a figure written here
    assert 0 < len(a) <= 2  # so 'a' ends by its end token within the limit
    assert rows[1]["phonemes"] == a and rows[1]["truncated"] is False
    assert ":2:" not in err


# -- item 16: one message format; no progress bar mixed into a log ------------------------------------------
def test_messages_are_whole_lines_when_stderr_is_not_a_terminal(cli, tmp_path):
    src = tmp_path / "w.txt"
    src.write_text("hello\n\nworld\n" * 20, encoding="utf-8")
    code, _, err = cli("g2p", "--model", "gru", "--input", src, "--output", tmp_path / "out.txt",
                       "--max-batch-tokens", 8)
    assert code == 1
    assert "\r" not in err  # no progress bar
    assert all(re.fullmatch(r"seqjit: (.+:\d+: )?\S.*", line) for line in err.splitlines()), err
    assert err.count("empty line") == 20


def test_messages_go_through_the_bar_on_a_terminal(cli, tmp_path, monkeypatch):
    src = tmp_path / "w.txt"
    src.write_text("hello\n\nworld\n", encoding="utf-8")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, _, err = cli("g2p", "--model", "gru", "--input", src, "--output", tmp_path / "out.txt")
    assert code == 1 and "\r" in err  # the bar was drawn
    pieces = re.split(r"[\r\n]", err)
    assert f"seqjit: {src}:2: empty line (no word)" in pieces  # the message is whole on its own line


def test_text_argument_that_is_not_utf8_is_an_error(cli):
    """--text whose bytes are not UTF-8 (read by Python as lone surrogates) is refused, naming the
    option, instead of its undecodable byte being pronounced as a word."""
    undecodable = b"\xff".decode("utf-8", "surrogateescape")  # how Python reads the argument's byte
    code, out, err = cli("g2p", "--model", "gru", "--text", f"hello {undecodable} world")
    assert code == 2 and out == ""
    assert err.strip() == "seqjit: error: g2p: --text is not valid utf-8 text (the argument's bytes do not decode)"
