"""``seqjit score``: two line-aligned files in, one JSON object per line out, the log-probabilities
against transformers' teacher-forced log-softmax (token ids with a tiny Marian; text through a
tokenizer.json with a tiny M2M100, targets tokenised as transformers builds labels); lines that
cannot be scored get an error object and a FILE:LINE report, the others are still scored."""
import json

import numpy as np
import pytest
import torch

from .conftest import EOS, PAD, write_lines
from .test_translate_hf_tokenizer import nllb  # noqa: F401  (the fixture)

TOL = 1e-4


def _reference(hf, source, decoder_in, scored):
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([decoder_in])).logits[0]
    lp = torch.log_softmax(logits.double(), dim=-1)
    return lp[torch.arange(len(scored)), torch.tensor(scored)].numpy()


def _score(cli, model_dir, src, tgt, *extra):
    code, out, err = cli("score", "--model", model_dir, "--input", src, "--target", tgt, *extra)
    return code, [json.loads(line) for line in out.splitlines()], err


def test_ids_equal_transformers(cli, marian, tmp_path):
    hf, _, sj_dir = marian
    sources = [[5, 6, 7, 0], [9, 10, 11, 12, 0], [20, 3, 0], [4, 0], [8, 0]]
    targets = [[30, 31], [40, 41, 42, 43], [], [96], [50]]  # [] a blank line; 96 outside the vocabulary
    write_lines(tmp_path / "src.txt", sources + [[7, 0]])  # one more source than targets
    write_lines(tmp_path / "tgt.txt", targets)
    code, rows, err = _score(cli, sj_dir, tmp_path / "src.txt", tmp_path / "tgt.txt", "--max-batch-size", "2")
    assert code == 1 and len(rows) == 6
    for i in (0, 1, 2, 4):
        row, t = rows[i], targets[i]
        want = _reference(hf, sources[i], [PAD] + t, t + [EOS])
        assert row["error"] is None and row["ids"] == t + [EOS]
        assert np.abs(np.array(row["log_probs"]) - want).max() <= TOL
        assert row["score"] == pytest.approx(float(want.sum()), abs=TOL)
        assert row["normalized_score"] == pytest.approx(float(want.sum()) / len(want), abs=TOL)
    assert rows[3]["ids"] is None and "token id 96, outside the target vocabulary" in rows[3]["error"]
    assert "has no line 6" in rows[5]["error"]
    assert "tgt.txt:4:" not in err and ":4: the target holds token id 96" in err
    assert "2 of 6 line pair(s) could not be scored" in err


def test_text_targets_tokenised_as_transformers_labels(cli, nllb, tmp_path):  # noqa: F811
    hf, tok, path = nllb
    sources, targets = ["the cat sat", "a dog in the park", "der Hund"], ["le chat", "the dog ran", ""]
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("\n".join(targets) + "\n", encoding="utf-8")
    code, rows, err = _score(cli, path, tmp_path / "src.txt", tmp_path / "tgt.txt")
    assert code == 0, err
    start = hf.config.decoder_start_token_id
    for row, s, t in zip(rows, sources, targets):
        labels = tok(t)["input_ids"] if t else [tok.eos_token_id]  # transformers' labels; a blank line: the end only
        want = _reference(hf, tok(s)["input_ids"], [start] + labels[:-1], labels)
        assert row["ids"] == labels and np.abs(np.array(row["log_probs"]) - want).max() <= TOL


def test_bad_arguments(cli, marian, tmp_path):
    _, _, sj_dir = marian
    write_lines(tmp_path / "a.txt", [[5, 0]])
    code, _, err = cli("score", "--model", sj_dir, "--input", "-", "--target", "-")
    assert code == 2 and "cannot both be stdin" in err
    code, _, err = cli("score", "--model", sj_dir, "--input", tmp_path / "a.txt", "--target", tmp_path / "missing")
    assert code == 2 and "missing" in err
    code, _, err = cli("score", "--model", sj_dir, "--input", tmp_path / "a.txt", "--target", tmp_path / "a.txt",
                       "--output", tmp_path / "a.txt")
    assert code == 2 and "erase the input" in err
