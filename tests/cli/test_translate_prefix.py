"""``seqjit translate --target-prefix``: the prefix of every line, as ids or as text tokenized as the
target (against MarianTokenizer's target side), and its errors."""
import json
import re

import pytest

import seqjit

from .test_translate import MAX_LEN, TEXT, _read_ids, text_model  # noqa: F401 - the fixture


def test_ids_prefix_equals_generate(cli, marian, helpers, tmp_path):
    _, _, sj_dir = marian
    sources = helpers.random_sources(6, seed=4)
    helpers.write_lines(tmp_path / "in.txt", sources)
    code, out, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--max-length", MAX_LEN,
                         "--target-prefix", "7 8 9", "--quiet")
    assert code == 0, err
    want = seqjit.load(sj_dir).generate(sources, max_length=MAX_LEN, target_prefix=[[7, 8, 9]] * len(sources))
    assert _read_ids(out) == [r.ids[0] for r in want]
    assert all(ids[:3] == [7, 8, 9] for ids in _read_ids(out))


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_text_prefix_is_tokenized_as_the_target(cli, text_model, tmp_path):  # noqa: F811
    from transformers import MarianTokenizer

    tok = MarianTokenizer(source_spm=str(text_model / "source.spm"), target_spm=str(text_model / "target.spm"),
                          vocab=str(text_model / "vocab.json"))
    prefix = tok(text_target="the cat")["input_ids"][:-1]  # transformers' target ids, its end token dropped
    assert prefix
    (tmp_path / "in.txt").write_text("\n".join(TEXT[:3]) + "\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", text_model, "--input", tmp_path / "in.txt", "--max-length", MAX_LEN,
                         "--target-prefix", "the cat", "--format", "json")
    assert code == 0, err
    model = seqjit.load(text_model)
    sources = [tok(line)["input_ids"] for line in TEXT[:3]]
    want = model.generate(sources, max_length=MAX_LEN, target_prefix=[prefix] * 3)
    assert [json.loads(line)["ids"] for line in out.splitlines()] == [r.ids[0] for r in want]


@pytest.mark.parametrize("prefix, match", [("7 x", "--target-prefix must hold space-separated token ids"),
                                           ("7 -1", "--target-prefix must hold space-separated token ids"),
                                           ("7 960", r"--target-prefix holds token id 960, outside the target")])
def test_bad_prefix_is_named(cli, marian, helpers, tmp_path, prefix, match):
    _, _, sj_dir = marian
    helpers.write_lines(tmp_path / "in.txt", helpers.random_sources(2, seed=4))
    code, _, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--target-prefix", prefix)
    assert code != 0
    assert re.search(match, err), err
