"""``--output`` of ``g2p`` and ``translate``: never the input file, never half-written in place."""
import os
import stat

import pytest

from seqjit.g2p import G2P

WORDS = "hello\nworld\nseqjit\nphoneme\n"


def _temporaries(directory):
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", ["g2p", "translate"])
@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "relative path"])
def test_output_that_is_the_input_is_refused(cli, tmp_path, monkeypatch, command, how):
    src = tmp_path / "w.txt"
    src.write_text(WORDS, encoding="utf-8")
    out = {"same path": src, "symlink": tmp_path / "link.txt", "hard link": tmp_path / "hard.txt",
           "relative path": "./w.txt"}[how]
    if how == "symlink":
        out.symlink_to(src)
    elif how == "hard link":
        os.link(src, out)
    monkeypatch.chdir(tmp_path)
    # the check comes before the model is loaded: the (missing) model is never reached
    model = ["--model", "gru"] if command == "g2p" else ["--model", tmp_path / "no-model"]
    code, stdout, err = cli(command, *model, "--input", src, "--output", out)
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and "is the input file" in err and "would erase the input" in err
    assert src.read_text(encoding="utf-8") == WORDS


def test_stdin_redirected_from_the_output_file_is_refused(cli, tmp_path, monkeypatch):
    src = tmp_path / "w.txt"
    src.write_text(WORDS, encoding="utf-8")
    with open(src, encoding="utf-8") as stdin:
        monkeypatch.setattr("sys.stdin", stdin)
        code, _, err = cli("g2p", "--model", "gru", "--output", src)
    assert code == 2 and "is stdin (the same file)" in err
    assert src.read_text(encoding="utf-8") == WORDS
    with open(os.devnull, encoding="utf-8") as stdin:  # not a regular file: nothing to erase
        monkeypatch.setattr("sys.stdin", stdin)
        code, out, err = cli("g2p", "--model", "gru", "--output", os.devnull)
    assert (code, out, err) == (0, "", "")


def _failing_predict(monkeypatch, exception, after_calls=1):
    """G2P.predict that raises ``exception`` on call ``after_calls + 1``."""
    real, calls = G2P.predict, []

    def predict(self, words, **options):
        calls.append(len(words))
        if len(calls) > after_calls:
            raise exception
        return real(self, words, **options)

    monkeypatch.setattr(G2P, "predict", predict)
    return calls


def test_a_crash_leaves_the_previous_output_as_it_was(cli, tmp_path, monkeypatch):
    src, dst = tmp_path / "w.txt", tmp_path / "out.txt"
    src.write_text(WORDS, encoding="utf-8")
    dst.write_text("the good output of an earlier run\n", encoding="utf-8")
    _failing_predict(monkeypatch, RuntimeError("simulated crash"))
    # sorted by length, one word per batch: the first batch is written before the crash
    with pytest.raises(RuntimeError, match="simulated crash"):
        cli("g2p", "--model", "gru", "--input", src, "--output", dst, "--max-batch-tokens", 1, "--quiet")
    assert dst.read_text(encoding="utf-8") == "the good output of an earlier run\n"
    assert _temporaries(tmp_path) == []


def test_an_interrupted_run_keeps_the_complete_aligned_lines(cli, tmp_path, monkeypatch):
    src, dst = tmp_path / "w.txt", tmp_path / "out.txt"
    words = ["ab", "cde", "fghi", "jklmn"]  # increasing lengths: batches come in input order
    src.write_text("".join(w + "\n" for w in words), encoding="utf-8")
    dst.write_text("old\n", encoding="utf-8")
    expected = [f"{p.word}\t{' '.join(p.phonemes)}" for p in G2P("gru").predict(words)]
    _failing_predict(monkeypatch, KeyboardInterrupt(), after_calls=2)
    code, _, err = cli("g2p", "--no-lexicon", "--model", "gru", "--input", src, "--output", dst, "--max-batch-tokens", 1, "--quiet")
    assert code == 130 and "interrupted" in err
    assert dst.read_text(encoding="utf-8") == "".join(line + "\n" for line in expected[:2])
    assert _temporaries(tmp_path) == []


def test_translate_crash_leaves_the_previous_output(cli, marian, helpers, tmp_path, monkeypatch):
    import seqjit
    from seqjit.commands import translate

    _, _, sj_dir = marian
    helpers.write_lines(tmp_path / "in.txt", [[5 + i] * (i + 1) for i in range(4)])
    (tmp_path / "out.txt").write_text("kept\n")
    model = seqjit.load(sj_dir)
    calls = []

    def generate(items, **options):
        calls.append(len(items))
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return seqjit.models.base.Seq2SeqModel.generate(model, items, **options)

    monkeypatch.setattr(model, "generate", generate)
    monkeypatch.setattr(translate, "load_any", lambda path: model)
    with pytest.raises(RuntimeError, match="simulated crash"):
        cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.txt",
            "--max-length", 4, "--max-batch-tokens", 1)
    assert (tmp_path / "out.txt").read_text() == "kept\n" and _temporaries(tmp_path) == []


def test_output_stream_keeps_mode_follows_links_and_writes_devices_directly(tmp_path):
    from seqjit.commands.output import output_stream

    target = tmp_path / "target.txt"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with output_stream(link) as stream:
        stream.write("new\n")
        assert target.read_text() == "old\n"  # nothing in place before the end
    assert link.is_symlink() and target.read_text() == "new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    before = os.stat(os.devnull)
    with output_stream(os.devnull) as stream:  # never replaced by a regular file (even as root)
        stream.write("discarded\n")
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        with output_stream(tmp_path / "missing-dir" / "out.txt"):
            pass
    assert _temporaries(tmp_path) == []
