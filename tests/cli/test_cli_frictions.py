"""CLI frictions of issue 25, item 5: ``inspect --max-length`` bounded by seqjit's limit and the
model's positions (the default lowered to them), ``--format json`` always valid UTF-8 (an argument
whose bytes are not UTF-8 is refused on its line), a too deeply nested or overlong ``--config``
refused with a short message."""
import json
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("value", [str(2**62), "65537", "0"])
def test_inspect_max_length_past_the_limit_is_refused(cli, value):
    code, out, err = cli("inspect", "transformer", "--max-length", value)
    assert code == 2 and out == "" and "--max-length must be an integer from 1 to 65536" in err


def test_inspect_max_length_follows_the_model_positions(cli):
    code, out, err = cli("inspect", "transformer", "--json")
    assert code == 0 and json.loads(out)["memory"]["max_length"] == 128  # not 256: the model has 128 positions
    code, out, err = cli("inspect", "transformer", "--max-length", "200")
    assert code == 2 and "exceeds the model's 128 positions" in err
    code, out, err = cli("inspect", "gru", "--json", "--max-length", "1000")  # an RNN has no positions
    assert code == 0 and json.loads(out)["memory"]["max_length"] == 1000


def test_json_output_is_valid_utf8_for_undecodable_arguments():
    env = dict(os.environ, LC_ALL="C.UTF-8")
    proc = subprocess.run([sys.executable, "-m", "seqjit", "g2p", "--model", "gru", "--format", "json",
                           os.fsencode("ab") + b"\xff" + b"c", "hello"], capture_output=True, timeout=120, env=env)
    lines = proc.stdout.decode("utf-8").splitlines()  # strict: raises on invalid UTF-8
    assert proc.returncode == 1 and len(lines) == 2
    first, second = map(json.loads, lines)
    assert first["error"].startswith("not valid utf-8 text") and first["phonemes"] is None
    assert second["word"] == "hello" and second["phonemes"]
    assert b"<argv>:1: not valid utf-8 text" in proc.stderr


@pytest.mark.parametrize("config,message", [("[" * 100_000, "--config is nested too deeply"),
                                            ("x" * 5000, "is neither a JSON object nor an existing file")])
def test_bad_config_is_refused_with_a_short_message(cli, tmp_path, config, message):
    src = tmp_path / "sd.safetensors"
    from safetensors.numpy import save_file
    import numpy as np

    save_file({"w": np.zeros(2, np.float32)}, src)
    code, out, err = cli("convert", src, tmp_path / "out", "--arch", "transformer", "--config", config)
    assert code == 2 and message in err and len(err) < 400


def _gru_state_dict_file(helpers, tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "gru.safetensors"
    save_file({k: v.contiguous() for k, v in helpers.gru_seq2seq(seed=2).state_dict().items()}, str(path))
    return path


def test_convert_prints_the_special_ids_it_filled_in(cli, helpers, tmp_path):
    path = _gru_state_dict_file(helpers, tmp_path)
    code, out, err = cli("convert", path, tmp_path / "a", "--arch", "rnn_seq2seq", "--config", '{"eos_id": 2}')
    assert code == 0, err
    assert "special ids by default: pad_id 0, decoder_start_id 1 (not in --config" in out
    code, out, err = cli("convert", path, tmp_path / "b", "--arch", "rnn_seq2seq",
                         "--config", '{"pad_id": 0, "decoder_start_id": 1, "eos_id": 2}')
    assert code == 0 and "special ids by default" not in out


def test_convert_quantize_names_the_int8_weights(cli, helpers, tmp_path):
    path = _gru_state_dict_file(helpers, tmp_path)
    code, out, err = cli("convert", path, tmp_path / "q", "--arch", "rnn_seq2seq", "--quantize", "int8")
    assert code == 0, err
    assert "parameters, float32, int8 weights" in out.splitlines()[0]


@pytest.mark.parametrize("argv,threads", [(["--threads", "1", "bench"], 1), (["bench", "--threads", "3"], 3),
                                          (["bench"], 2)])
def test_bench_takes_the_global_threads(monkeypatch, argv, threads):
    from seqjit.cli import main
    from seqjit.g2p import speed

    seen = []
    monkeypatch.setattr(speed, "measure", lambda threads, **sizes: seen.append(threads) or [])
    monkeypatch.setattr(speed, "markdown", lambda rows: "")
    monkeypatch.setattr("seqjit.set_num_threads", lambda n: n)
    assert main([*argv, "g2p", "--quick"]) == 0
    assert seen == [threads]


def test_a_pronunciation_repr_leaves_out_the_attention_matrix():
    from seqjit.g2p import G2P

    result = G2P("attention").predict(["pronunciation"], return_attention=True)[0]
    assert result.attention is not None and result.attention.size > 50
    assert "attention" not in repr(result) and len(repr(result)) < 1000


class _TerminalStdin:
    """A terminal on which the user typed ``text`` and then Ctrl-D."""

    def __init__(self, text: str):
        import io

        self.buffer = io.BytesIO(text.encode())

    def isatty(self):
        return True

    def fileno(self):
        raise OSError("no descriptor")


@pytest.mark.parametrize("command", ["g2p", "translate"])
def test_reading_a_terminal_says_so(cli, marian, monkeypatch, command):
    monkeypatch.setattr(sys, "stdin", _TerminalStdin("hello\n" if command == "g2p" else "5 6 7\n"))
    argv = ["g2p", "--model", "gru"] if command == "g2p" else ["translate", "--model", marian[2], "--max-length", 3]
    code, out, err = cli(*argv)
    assert code == 0 and len(out.splitlines()) == 1
    assert "from the terminal, one per line; end with Ctrl-D" in err


@pytest.mark.parametrize("command", ["g2p", "translate", "convert", "inspect", "bench", "demo"])
def test_help_shows_no_markup(capsys, command):
    from seqjit.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text and ":mod:" not in text and ":class:" not in text
    if command == "g2p":
        assert "1 decodes greedily (default 1)" in text


@pytest.mark.parametrize("beam", [1, 4])
def test_g2p_json_scores_are_on_one_scale_for_greedy_and_beam(cli, beam):
    """``score``: the sum of log-probabilities in both searches; ``normalized_score``: divided by the
    output length (end token included), what beam search ranks by."""
    from seqjit.g2p import G2P

    words = ["hello", "pronunciation"]
    code, out, err = cli("g2p", "--no-lexicon", "--model", "attention", "--format", "json", "--beam-size", beam, *words)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    for row, want in zip(rows, G2P("attention").predict(words, beam_size=beam)):
        length = len(want.phonemes) + 1
        summed, normalized = (want.score * length, want.score) if beam > 1 else (want.score, want.score / length)
        assert row["score"] == pytest.approx(summed) and row["normalized_score"] == pytest.approx(normalized)


def test_demo_png_in_a_missing_directory_is_refused_before_the_demo(cli, tmp_path):
    code, out, err = cli("demo", "--png", tmp_path / "missing" / "heat.png")
    assert code == 2 and out == "" and "does not exist" in err
    assert not (tmp_path / "missing").exists()


def test_demo_default_png_is_a_new_private_directory():
    import stat

    from seqjit.g2p.demo import default_png

    first, second = default_png(), default_png()
    try:
        assert first.parent != second.parent and first.parent.name.startswith("seqjit-demo-")
        assert stat.S_IMODE(first.parent.stat().st_mode) == 0o700
    finally:
        first.parent.rmdir()
        second.parent.rmdir()
