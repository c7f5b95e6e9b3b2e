"""``seqjit translate --format json`` (issue 25, item 5): ids, scores on one scale for greedy and beam
search (``score`` the sum of log-probabilities, ``normalized_score`` divided by the length), the
n-best, and an object with the error for a line that cannot be used."""
import json

import pytest

import seqjit

SOURCES = [[5, 6, 7], [9, 10, 11, 12, 0], [20, 3]]
MAX_LEN = 6


def _run(cli, model_dir, tmp_path, *extra):
    src = tmp_path / "in.txt"
    src.write_text("".join(" ".join(map(str, s)) + "\n" for s in SOURCES) + "abc\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", model_dir, "--input", src, "--max-length", MAX_LEN,
                         "--format", "json", *extra)
    return code, [json.loads(line) for line in out.splitlines()], err


def _length(ids):
    return len(ids) if len(ids) >= MAX_LEN else len(ids) + 1


def test_greedy_json_scores(cli, marian, tmp_path):
    _, _, sj_dir = marian
    code, rows, err = _run(cli, sj_dir, tmp_path)
    assert code == 1 and len(rows) == len(SOURCES) + 1
    want = seqjit.load(sj_dir).generate(SOURCES, max_length=MAX_LEN, return_scores=True)
    for row, res in zip(rows, want):
        assert row["ids"] == res.ids[0] and row["text"] is None and row["error"] is None
        assert row["score"] == pytest.approx(res.scores[0])  # greedy: the sum of log-probabilities
        assert row["normalized_score"] == pytest.approx(res.scores[0] / _length(res.ids[0]))
        assert row["hypotheses"] == [{k: row[k] for k in ("ids", "text", "score", "normalized_score")}]
    assert rows[-1]["ids"] is None and rows[-1]["hypotheses"] == [] and "is not a token id" in rows[-1]["error"]
    assert "objects with an \"error\" in their place" in err


def test_beam_json_n_best_on_the_same_scale(cli, marian, tmp_path):
    _, _, sj_dir = marian
    code, rows, err = _run(cli, sj_dir, tmp_path, "--beam-size", 3, "--num-hypotheses", 3)
    want = seqjit.load(sj_dir).generate(SOURCES, max_length=MAX_LEN, beam_size=3, num_hypotheses=3, return_scores=True)
    for row, res in zip(rows, want):
        assert [h["ids"] for h in row["hypotheses"]] == res.ids
        for h, ids, normalized in zip(row["hypotheses"], res.ids, res.scores):
            assert h["normalized_score"] == pytest.approx(normalized)  # what beam search ranks by
            assert h["score"] == pytest.approx(normalized * _length(ids))  # the sum, as greedy gives
        ranked = [h["normalized_score"] for h in row["hypotheses"]]
        assert ranked == sorted(ranked, reverse=True)


@pytest.mark.parametrize("argv,message", [(["--num-hypotheses", "2"], "needs --beam-size of at least 2"),
                                          (["--beam-size", "2", "--num-hypotheses", "2", "--format", "text"],
                                           "--num-hypotheses needs --format json")])
def test_n_best_option_errors(cli, marian, tmp_path, argv, message):
    _, _, sj_dir = marian
    (tmp_path / "in.txt").write_text("5 6\n")
    code, out, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", *argv)
    assert code == 2 and message in err


def test_max_input_length_refuses_or_truncates_per_line(cli, marian, tmp_path):
    """``--max-input-length 3``: the 5-token line is an error of its own (the others decode); with
    ``--truncate-input`` it decodes as its first 3 tokens and says so."""
    _, _, sj_dir = marian
    model = seqjit.load(sj_dir)
    code, rows, _ = _run(cli, sj_dir, tmp_path, "--max-input-length", 3)
    assert code == 1 and "sources[0] has 5 tokens, more than max_input_length 3" in rows[1]["error"]
    assert rows[1]["ids"] is None and [rows[0]["ids"], rows[2]["ids"]] == \
        [r.ids[0] for r in model.generate([SOURCES[0], SOURCES[2]], max_length=MAX_LEN)]
    code, rows, _ = _run(cli, sj_dir, tmp_path, "--max-input-length", 3, "--truncate-input")
    cut = model.generate([s[:3] for s in SOURCES], max_length=MAX_LEN)
    assert [row["ids"] for row in rows[:3]] == [r.ids[0] for r in cut]
    assert [row.get("truncated", False) for row in rows[:3]] == [False, True, False]
