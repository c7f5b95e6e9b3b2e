"""``--input`` and ``--lexicon`` that are not plain files: ``/dev/zero`` is refused before a model
loads, a FIFO is read as a stream with a bound on a line's length (one fed from ``/dev/zero``
is an error naming FILE:LINE, soon, not memory growing without end), a FIFO or a device as the
lexicon is refused; and a UTF-8 byte order mark opening a file or stdin is not read as a letter of
the first word. Runs that could read forever on a regression run in a child with a time limit and
a memory cap, or under an alarm."""
import os
import threading

import pytest

from seqjit.g2p import G2P

from ..hostile_paths import deadline, run_bounded

BOM = b"\xef\xbb\xbf"


def feed_fifo(path, data: bytes, repeat: int = 1):
    """A thread writing ``data`` ``repeat`` times into FIFO ``path`` (stops when the reader leaves)."""
    os.mkfifo(path)

    def write():
        try:
            with open(path, "wb") as f:
                for _ in range(repeat):
                    f.write(data)
        except (BrokenPipeError, OSError):
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_dev_zero_as_input_is_refused_before_the_model_loads(tmp_path):
    for argv in (["translate", "--model", str(tmp_path / "no-model"), "--input", "/dev/zero"],
                 ["g2p", "--no-lexicon", "--input", "/dev/zero"]):
        done = run_bounded(f"import sys; from seqjit.cli import main; sys.exit(main({argv!r}))", seconds=60,
                           memory=1 << 30)
        assert done.returncode == 2, done.stderr[-2000:]
        assert "/dev/zero is a device" in done.stderr


@pytest.mark.parametrize("command", ["translate", "g2p"])
def test_fifo_without_line_breaks_is_an_error_naming_the_line(tmp_path, cli, marian, command):
    """A FIFO is read as a stream (as stdin); one endless line (zeros) stops at the line bound."""
    fifo = tmp_path / "in.fifo"
    feed_fifo(fifo, b"7 8\n" + b"\0" * (1 << 20), repeat=64)
    argv = (["translate", "--model", marian[2], "--input", fifo] if command == "translate"
            else ["g2p", "--no-lexicon", "--model", "gru", "--input", fifo])
    with deadline(60):
        code, out, err = cli(*argv)
    assert code == 2, err
    assert f"{fifo}:2: the line is longer than 1048576 bytes" in err


def test_fifo_input_is_read_as_a_stream(tmp_path, cli):
    fifo = tmp_path / "words.fifo"
    feed_fifo(fifo, b"hello\nworld\n")
    with deadline(60):
        code, out, err = cli("g2p", "--no-lexicon", "--model", "gru", "--input", fifo)
    assert code == 0, err
    assert [line.split("\t")[0] for line in out.splitlines()] == ["hello", "world"]


def test_byte_order_mark_is_not_a_letter(tmp_path, cli, marian, helpers):
    """g2p: the first word of a file with a BOM (and of stdin) is pronounced as without it;
    translate: the first line's ids parse (the BOM is not part of the first id)."""
    want = " ".join(G2P("gru").predict(["hello"])[0].phonemes)
    (tmp_path / "words.txt").write_bytes(BOM + b"hello\nhello\n")
    code, out, err = cli("g2p", "--no-lexicon", "--model", "gru", "--input", tmp_path / "words.txt")
    assert code == 0, err
    assert out.splitlines() == [f"hello\t{want}"] * 2
    code, out, err = cli("g2p", "--no-lexicon", "--model", "gru", stdin=BOM + b"hello\n")
    assert code == 0, err
    assert out.splitlines() == [f"hello\t{want}"]
    sources = helpers.random_sources(3, seed=2)
    helpers.write_lines(tmp_path / "ids.txt", sources)
    (tmp_path / "bom.txt").write_bytes(BOM + (tmp_path / "ids.txt").read_bytes())
    results = []
    for name in ("ids.txt", "bom.txt"):
        code, out, err = cli("translate", "--model", marian[2], "--input", tmp_path / name, "--max-length", 8)
        assert code == 0, err
        results.append(out)
    assert results[0] == results[1] and len(results[1].splitlines()) == 3


def test_lexicon_byte_order_mark_and_special_files(tmp_path):
    from seqjit.errors import LexiconError
    from seqjit.g2p.lexicon import Lexicon

    (tmp_path / "lex.txt").write_bytes(BOM + "hello\tHH AH0 L OW1\n".encode())
    assert Lexicon.from_file(tmp_path / "lex.txt").lookup("hello") == [["HH", "AH0", "L", "OW1"]]
    os.mkfifo(tmp_path / "lex.fifo")
    with deadline(30), pytest.raises(LexiconError, match=r"lex.fifo: the lexicon is a FIFO"):
        Lexicon.from_file(tmp_path / "lex.fifo")
    code = ("from seqjit.g2p.lexicon import Lexicon\n"
            "try:\n    Lexicon.from_file('/dev/zero')\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    done = run_bounded(code, seconds=60, memory=1 << 30)
    assert done.returncode == 0 and done.stdout.startswith("LexiconError /dev/zero: the lexicon is a device"), \
        (done.stdout, done.stderr[-2000:])


def test_parquet_sniffing_does_not_open_a_fifo(tmp_path):
    """--ray peeks at the input for Parquet's magic: a FIFO must not be opened for that (it would
    block, and its writer's data would go to the peek instead of the reader)."""
    from seqjit.commands.ray_run import is_parquet

    os.mkfifo(tmp_path / "in.fifo")
    with deadline(30):
        assert not is_parquet(tmp_path / "in.fifo")
    (tmp_path / "t.parquet").write_bytes(b"PAR1....")
    assert is_parquet(tmp_path / "t.parquet")
