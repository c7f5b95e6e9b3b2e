"""``seqjit g2p``, ``seqjit demo`` and the heatmaps, through the command line."""
import os
import subprocess
import sys

import numpy as np
import pytest

from seqjit.cli import main
from seqjit.g2p import G2P
from seqjit.g2p.heatmap import SHADES, ascii_heatmap


def test_g2p_words_print_the_models_phonemes(capsys):
    assert main(["g2p", "--no-lexicon", "--model", "attention", "hello", "Biodegradable"]) == 0
    out = capsys.readouterr().out.splitlines()
    expected = G2P("attention").predict(["hello", "Biodegradable"])
    assert out == [f"{p.word}\t{' '.join(p.phonemes)}" for p in expected]


def test_g2p_file_keeps_lines_aligned_and_reports_bad_ones(tmp_path, capsys):
    src = tmp_path / "words.txt"
    src.write_bytes("hello\n\nMüßig\nbad\xff\xfeline\nworld\n".encode("latin-1")
                    .replace("Müßig".encode("latin-1"), "Müßig".encode()))
    dst = tmp_path / "out.txt"
    status = main(["g2p", "--no-lexicon", "--model", "gru", "--input", str(src), "--output", str(dst), "--max-batch-tokens", "8"])
    err = capsys.readouterr().err
    assert status == 1
    lines = dst.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 6 and lines[-1] == ""  # five input lines, five output lines
    expected = {p.word: " ".join(p.phonemes) for p in G2P("gru").predict(["hello", "Müßig", "world"])}
    assert lines[0] == f"hello\t{expected['hello']}" and lines[4] == f"world\t{expected['world']}"
    assert lines[1] == "" and lines[3] == ""
    assert lines[2] == f"Müßig\t{expected['Müßig']}"
    assert f"seqjit: {src}:2: empty line" in err
    # ü is folded to u silently; ß has no accent-free form: reported, with the spelling that was read
    assert f"seqjit: {src}:3: 'Müßig' has character(s) 'ß' the model does not know; read as <unk> " \
           "(accents folded: read as 'mußig')" in err
    assert "'ü'" not in err
    assert f"seqjit: {src}:4: not valid utf-8" in err
    assert "seqjit: 2 of 5 line(s) could not be pronounced" in err


def test_g2p_errors_are_clear(tmp_path, capsys):
    assert main(["g2p", "--model", str(tmp_path / "nope"), "hello"]) == 2
    assert "neither a bundled G2P model" in capsys.readouterr().err
    assert main(["g2p", "--input", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert main(["g2p", "--input", str(tmp_path / "missing.txt"), "hello"]) == 2
    assert "give words or --input FILE, not both" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["g2p", "--model", str(tmp_path / "empty"), "hello"]) == 2
    assert "g2p.json: missing" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    (bad / "g2p.json").write_text((G2P("gru").directory / "g2p.json").read_text())
    assert main(["g2p", "--model", str(bad), "hello"]) == 2
    assert f"{bad / 'config.json'}" in capsys.readouterr().err


def test_g2p_beam_search_runs():
    greedy = G2P("transformer").predict(["anthropocentric"])[0]
    beam = G2P("transformer").predict(["anthropocentric"], beam_size=4)[0]
    assert beam.phonemes and beam.score >= greedy.score - 1e-4


def test_ascii_heatmap_shades_and_checks_shape():
    text = ascii_heatmap(list("ab"), ["AH0", "B"], np.array([[1.0, 0.0], [0.5, 0.5]]))
    assert text.splitlines() == ["    a b", "AH0 @  ", "  B = ="]
    assert SHADES[0] == " " and SHADES[4] == "=" and SHADES[-1] == "@"
    with pytest.raises(ValueError, match="phonemes x letters"):
        ascii_heatmap(list("abc"), ["AH0"], np.ones((1, 2)))


def test_demo_runs_from_the_command_line(tmp_path):
    png, cache = tmp_path / "heat.png", tmp_path / "numba-cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-m", "seqjit", "demo", "--png", str(png)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for title in ("GRU seq2seq", "Bahdanau attention", "Transformer"):
        assert title in out
    assert "supercalifragilisticexpialidocious" in out and "words/s" in out
    assert f"heatmap PNG: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the demo runs on the Cython kernels: a fresh install compiles nothing with Numba (cold start)
    assert not cache.exists() or not any(cache.rglob("*.nbi"))


def test_demo_example_labels_match_the_dictionary():
    from seqjit.g2p.data import load_entries, split_of
    from seqjit.g2p.demo import EXAMPLES

    entries = load_entries()
    for word, label in EXAMPLES:
        if label == "not in CMUdict":
            assert word not in entries, word
        else:
            assert word in entries and label.startswith(split_of(word)), word
