"""CLI rules of issue 25: a FIFO input read once, SIGTERM removes the temporary output, a read-only
output refused, a word holding a line break refused on its line, ids as plain ASCII decimal,
messages quoting at most ~80 characters, ``--threads`` bounded, the default G2P length capped.
Child processes run under a deadline, so a hang fails the test instead of the suite."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import seqjit
from seqjit.g2p import G2P

DEADLINE = 60  # seconds


def _feed_fifo(path, data: bytes, hold: threading.Event | None = None):
    """A thread writing ``data`` into the FIFO ``path`` once a reader opens it (non-blocking opens,
    retried until the deadline, so it never outlives the test); ``hold``: keep it open until set."""
    def run():
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.01)
                continue
            os.set_blocking(fd, True)
            try:
                os.write(fd, data)
                if hold is not None:
                    hold.wait(DEADLINE)
            except BrokenPipeError:
                pass
            finally:
                os.close(fd)
            return
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _seqjit(*argv, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "seqjit", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_g2p_reads_a_fifo_input_once(tmp_path):
    fifo = tmp_path / "words.fifo"
    os.mkfifo(fifo)
    writer = _feed_fifo(fifo, b"hello\nworld\n")
    proc = _seqjit("g2p", "--no-lexicon", "--model", "gru", "--input", fifo)
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("seqjit g2p --input FIFO hung (opened the FIFO twice?)")
    writer.join(DEADLINE)
    expected = "".join(f"{p.word}\t{' '.join(p.phonemes)}\n" for p in G2P("gru").predict(["hello", "world"]))
    assert (proc.returncode, out) == (0, expected), err


def test_sigterm_removes_the_temporary_output_file(tmp_path):
    fifo, out = tmp_path / "words.fifo", tmp_path / "out.txt"
    os.mkfifo(fifo)
    out.write_text("previous run\n", encoding="utf-8")
    release = threading.Event()
    writer = _feed_fifo(fifo, b"hello\n", hold=release)  # the input stays open: the run waits for more
    proc = _seqjit("g2p", "--model", "gru", "--input", fifo, "--output", out, "--quiet")
    try:
        deadline = time.monotonic() + DEADLINE
        while not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]:
            assert time.monotonic() < deadline and proc.poll() is None, "no temporary output file appeared"
            time.sleep(0.02)
        time.sleep(0.3)  # into the blocking read
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        writer.join(DEADLINE)
    assert proc.returncode == 128 + signal.SIGTERM
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "words.fifo"]
    assert out.read_text(encoding="utf-8") == "previous run\n"


def test_read_only_output_is_refused(cli, tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("keep me\n", encoding="utf-8")
    os.chmod(out, 0o444)
    code, stdout, err = cli("g2p", "--model", "gru", "hello", "--output", out)
    assert code == 2 and "read-only" in err and str(out) in err
    assert out.read_text(encoding="utf-8") == "keep me\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("word", ["foo\nbar", "foo\rbar", "foo\u2028bar", "foo\x0bbar"])
def test_a_word_holding_a_line_break_is_refused_on_its_line(cli, word):
    code, out, err = cli("g2p", "--no-lexicon", "--model", "gru", word, "baz")
    assert code == 1
    assert out.split("\n") == ["", "baz\t" + " ".join(G2P("gru").predict(["baz"])[0].phonemes), ""]
    assert err.startswith("seqjit: <argv>:1: the word holds a line break")


def test_a_phoneme_symbol_holding_white_space_is_refused(tmp_path):
    import json
    import shutil

    from seqjit.errors import ModelFormatError
    from seqjit.g2p.vocab import G2P_FILE, Vocab

    directory = tmp_path / "model"
    shutil.copytree(G2P("gru").directory, directory)
    data = json.loads((directory / G2P_FILE).read_text(encoding="utf-8"))
    for bad in ("A\nB", "A B"):
        data["phonemes"][0] = bad
        (directory / G2P_FILE).write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(ModelFormatError, match="holds white space or a line break"):
            Vocab.load(directory)
    data["phonemes"][0] = "A\udcff"  # written as the JSON escape \udcff, which json reads back
    (directory / G2P_FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelFormatError, match="phoneme symbol .* holds a lone surrogate"):
        Vocab.load(directory)


@pytest.mark.parametrize("token", ["1_0", "+5", "\u0665", "５", "-3", "0x5"])
def test_translate_ids_are_plain_ascii_decimal(cli, marian, tmp_path, token):
    _, _, sj_dir = marian
    src = tmp_path / "in.txt"
    src.write_text(f"5 {token} 7\n8 9\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", sj_dir, "--input", src, "--max-length", 4)
    assert code == 1 and out.split("\n")[0] == "" and len(out.split("\n")) == 3
    assert f"in.txt:1: token 2 ({token!r}) is not a token id" in err


def _longest_run(text: str, char: str) -> int:
    return max((len(run) for run in text.split("\n") for run in __import__("re").findall(f"{char}+", run)), default=0)


def test_messages_quote_at_most_80_characters(cli, marian, tmp_path):
    _, _, sj_dir = marian
    src = tmp_path / "in.txt"
    src.write_text("5 " + "x" * 100_000 + "\n" + "9" * 100_000 + "\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", sj_dir, "--input", src, "--max-length", 4)
    assert code == 1 and out == "\n\n" and len(err.splitlines()) == 3
    assert _longest_run(err, "x") <= 80 and _longest_run(err, "9") <= 80 and "100000 characters" in err
    code, out, err = cli("g2p", "--model", "gru", "\u2603" * 5_000, "--max-length", 2)
    assert code == 0 and 0 < _longest_run(err, "\u2603") <= 80


@pytest.mark.parametrize("value", [str(2**40), "2**40", "99999999999999999999999999999999999999999999"])
def test_threads_past_the_limit_is_a_usage_error(cli, capsys, value):
    with pytest.raises(SystemExit) as stop:
        cli("--threads", value, "g2p", "--model", "gru", "hello")
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("seqjit: error: argument --threads") == 1 and len(err.splitlines()[-1]) < 120


def test_set_num_threads_past_the_limit_is_refused_and_changes_nothing():
    before = seqjit.get_num_threads()
    with pytest.raises(ValueError, match="at most"):
        seqjit.set_num_threads(2**40)
    assert seqjit.get_num_threads() == before
    assert G2P("gru").predict(["hello"])[0].phonemes


def test_the_default_g2p_length_limit_is_capped(monkeypatch):
    g2p = G2P("gru")
    seen = []
    real = g2p.model.generate

    def generate(sources, **options):
        seen.append(options["max_length"])
        return real(sources, **options)

    monkeypatch.setattr(g2p.model, "generate", generate)
    g2p.predict(["a" * 300])  # 2 x 300 + 4 = 604 by the rule
    assert seen == [256]
