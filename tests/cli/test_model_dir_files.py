"""The tokenizer files and ``config.json`` that ``translate`` and ``convert`` read from a model
directory go through seqjit.models.files: a link leaving the directory, a FIFO, a link to
``/dev/zero`` or an oversized file is refused with a ModelFormatError naming the file, never
followed, waited on, read without bound, or silently ignored.

Cases that would hang or exhaust memory if a read were unguarded run in a child interpreter
with a time limit and an address-space limit."""
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import tracemalloc
import types

import pytest

from seqjit.errors import ModelFormatError

TEXT = ["the cat sat on the mat", "a dog ran in the park", "we like to read books", "birds fly over the sea"]
MODEL = types.SimpleNamespace(eos_id=0, pad_id=95)  # all TextCodec asks of the model
TOKENIZER = ("source.spm", "target.spm", "vocab.json", "target_vocab.json")
SPECIAL = ["fifo", "dev_zero"]
REFUSED_SPECIAL = {"fifo": "is a FIFO", "dev_zero": "outside the model directory"}


def bounded(code: str, *args, seconds: int = 30, memory: int = 2 << 30) -> str:
    """What ``code`` (run with ``sys.argv[1:] == args``) prints, run in a fresh interpreter that
    may take at most ``seconds`` and ``memory`` bytes of address space."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    try:
        done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                              timeout=seconds, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {seconds} s (a blocking read of a FIFO?)")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def outcome(call: str) -> str:
    """A child script: runs ``call`` and prints ``Type: message`` of what it raised, or ``no error``."""
    return ("import sys\nfrom pathlib import Path\ntry:\n    " + call +
            "\nexcept Exception as exc:\n    print(type(exc).__name__, exc, sep=': ')\nelse:\n    print('no error')\n")


def special(path, kind: str) -> None:
    """Put a FIFO, or a link to /dev/zero, at ``path``."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)


def sparse(path, size: int) -> None:
    """A file of ``size`` zero bytes that takes no disk space."""
    with open(path, "wb") as f:
        f.truncate(size)


@pytest.fixture(scope="module")
def spm_proto():
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXT * 4), model_writer=buffer, vocab_size=40,
                                   hard_vocab_limit=False, character_coverage=1.0, minloglevel=2)
    return buffer.getvalue()


@pytest.fixture
def tokenizer_dir(tmp_path, spm_proto):
    """A directory holding the four Marian tokenizer files, all valid."""
    import sentencepiece as spm

    directory = tmp_path / "model"
    directory.mkdir()
    sp = spm.SentencePieceProcessor(model_proto=spm_proto)
    vocab = {"</s>": 0, "<unk>": 1, **{sp.id_to_piece(i): i + 2 for i in range(3, sp.get_piece_size())}}
    for name in ("source.spm", "target.spm"):
        (directory / name).write_bytes(spm_proto)
    for name in ("vocab.json", "target_vocab.json"):
        (directory / name).write_text(json.dumps(vocab), encoding="utf-8")
    return directory


def _codec(directory):
    from seqjit.text.translation import TextCodec

    return TextCodec(directory, MODEL)


# -- translate: the tokenizer files --------------------------------------------------------------
def test_valid_tokenizer_files_load(tokenizer_dir):
    codec = _codec(tokenizer_dir)  # the control for the refusals below
    assert codec.encode("the cat")[-1] == 0 and codec.vocab["<unk>"] == 1


@pytest.mark.parametrize("name", TOKENIZER)
def test_tokenizer_file_linked_outside_is_refused(tokenizer_dir, tmp_path, name):
    outside = tmp_path / f"outside_{name}"
    shutil.move(tokenizer_dir / name, outside)  # a valid file, only elsewhere
    os.symlink(outside, tokenizer_dir / name)
    with pytest.raises(ModelFormatError, match=f"{name} resolves to .* outside the model directory"):
        _codec(tokenizer_dir)


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("name", TOKENIZER)
def test_special_file_in_place_of_tokenizer_file_is_refused(tokenizer_dir, name, kind):
    special(tokenizer_dir / name, kind)
    got = bounded(outcome("from seqjit.text.translation import TextCodec\n    import types\n"
                          "    TextCodec(Path(sys.argv[1]), types.SimpleNamespace(eos_id=0, pad_id=95))"),
                  tokenizer_dir)
    assert got.startswith("ModelFormatError: ") and name in got and REFUSED_SPECIAL[kind] in got, got


@pytest.mark.parametrize("name, limit", [("source.spm", "SPM_MAX_BYTES"), ("target.spm", "SPM_MAX_BYTES"),
                                         ("vocab.json", "VOCAB_MAX_BYTES"), ("target_vocab.json", "VOCAB_MAX_BYTES")])
def test_oversized_tokenizer_file_is_refused_unread(tokenizer_dir, name, limit):
    from seqjit.text import translation

    size = getattr(translation, limit) + 1
    assert size > 32 << 20  # room for real Marian files (1-2 MiB)
    sparse(tokenizer_dir / name, size)
    with pytest.raises(ModelFormatError, match=f"{name} is {size} bytes, more than"):
        _codec(tokenizer_dir)


def test_empty_spm_is_refused(tokenizer_dir):
    (tokenizer_dir / "target.spm").write_bytes(b"")  # sentencepiece would keep an unloaded processor
    with pytest.raises(ModelFormatError, match="target.spm is empty"):
        _codec(tokenizer_dir)


def test_translate_refuses_fifo_source_spm_instead_of_reading_ids(cli, marian, tmp_path):
    """Before, a FIFO source.spm made translate fall back to token ids silently."""
    directory = tmp_path / "model"
    shutil.copytree(marian[2], directory)
    os.mkfifo(directory / "source.spm")
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    unblock = threading.Timer(20, _open_for_writing, [directory / "source.spm"])  # ends a blocked open, if any
    unblock.start()
    try:
        code, out, err = cli("translate", "--model", directory, "--input", tmp_path / "in.txt", "--max-length", 4)
    finally:
        unblock.cancel()
    assert code == 2 and out == ""
    assert f"{directory / 'source.spm'} is a FIFO" in err


def _open_for_writing(fifo) -> None:
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader waiting
        pass


def _peak_bytes(fn) -> tuple:
    """(exception raised by ``fn()``, peak bytes Python allocated meanwhile)."""
    tracemalloc.start()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - handed to the test
        raised = exc
    else:
        raised = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, peak


def test_translate_refuses_oversized_config_unread(marian, tmp_path):
    from seqjit.text.translation import load_any

    load_any(marian[2])  # imports done before memory is measured
    directory = tmp_path / "model"
    shutil.copytree(marian[2], directory)
    sparse(directory / "config.json", 64 << 20)
    raised, peak = _peak_bytes(lambda: load_any(directory))
    assert isinstance(raised, ModelFormatError) and "config.json is 67108864 bytes, more than" in str(raised)
    assert peak < 4 << 20, f"{peak} bytes allocated to refuse it"


# -- convert: config.json and the tokenizer files it copies ----------------------------------------
@pytest.fixture
def hf_src(marian, tmp_path):
    src = tmp_path / "hf"
    src.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(marian[1] / name, src / name)
    return src


@pytest.mark.parametrize("kind", SPECIAL)
def test_convert_refuses_special_config(hf_src, tmp_path, kind):
    special(hf_src / "config.json", kind)
    got = bounded(outcome("from seqjit.commands.convert import convert\n    convert(sys.argv[1], sys.argv[2])"),
                  hf_src, tmp_path / "out")
    assert got.startswith("ModelFormatError: ") and "config.json" in got and REFUSED_SPECIAL[kind] in got, got


def test_convert_refuses_oversized_config_unread(hf_src, tmp_path):
    from seqjit.commands.convert import convert

    sparse(hf_src / "config.json", 64 << 20)
    raised, peak = _peak_bytes(lambda: convert(hf_src, tmp_path / "out"))
    assert isinstance(raised, ModelFormatError) and "config.json is 67108864 bytes, more than" in str(raised)
    assert peak < 4 << 20, f"{peak} bytes allocated to refuse it"


def test_convert_refuses_tokenizer_file_linked_outside(cli, hf_src, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"not the model's")
    os.symlink(outside, hf_src / "source.spm")
    code, out, err = cli("convert", hf_src, tmp_path / "out")
    assert code == 2 and "source.spm resolves to" in err and "outside the model directory" in err
    assert not (tmp_path / "out" / "source.spm").exists() and not (tmp_path / "out" / "model.safetensors").exists()


@pytest.mark.parametrize("kind", SPECIAL)
def test_convert_refuses_special_tokenizer_file(hf_src, tmp_path, kind):
    """Before, a FIFO or device vocab.json was skipped silently: the output lacked it."""
    special(hf_src / "vocab.json", kind)
    got = bounded(outcome("from seqjit.commands.convert import convert\n    convert(sys.argv[1], sys.argv[2])"),
                  hf_src, tmp_path / "out")
    assert got.startswith("ModelFormatError: ") and "vocab.json" in got and REFUSED_SPECIAL[kind] in got, got
    assert not (tmp_path / "out" / "model.safetensors").exists()
