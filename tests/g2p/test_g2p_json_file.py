"""A G2P model's ``g2p.json`` is read as every model file is (seqjit.models.files): a link leaving
the model directory, a FIFO, a link to ``/dev/zero`` or an oversized file is refused with a
ModelFormatError naming it. The FIFO and device cases, which hang or exhaust memory when read
unguarded, run in a child interpreter with a time and an address-space limit."""
import os
import resource
import shutil
import subprocess
import sys

import pytest

from seqjit.cli import main
from seqjit.errors import ModelFormatError
from seqjit.g2p import G2P
from seqjit.g2p.vocab import G2P_FILE, G2P_MAX_BYTES, Vocab

CHILD = """import sys
from seqjit.g2p.vocab import Vocab
try:
    Vocab.load(sys.argv[1])
except Exception as exc:
    print(type(exc).__name__, exc, sep=": ")
else:
    print("no error")
"""


def _load_in_child(directory, seconds: int = 30, memory: int = 2 << 30) -> str:
    """``Type: message`` of what Vocab.load(directory) raises in a bounded child interpreter."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(directory)], capture_output=True, text=True,
                              timeout=seconds, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"Vocab.load still running after {seconds} s (a blocking read of a FIFO?)")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def model_dir(tmp_path):
    """A copy of the bundled GRU model."""
    directory = tmp_path / "gru"
    shutil.copytree(G2P("gru").directory, directory)
    return directory


def test_g2p_json_linked_outside_is_refused(model_dir, tmp_path, capsys):
    assert main(["g2p", "--model", str(model_dir), "hello"]) == 0  # the control: the copy works
    capsys.readouterr()
    outside = tmp_path / G2P_FILE
    shutil.move(model_dir / G2P_FILE, outside)  # the same valid tables, only elsewhere
    os.symlink(outside, model_dir / G2P_FILE)
    with pytest.raises(ModelFormatError, match="g2p.json resolves to .* outside the model directory"):
        Vocab.load(model_dir)
    assert main(["g2p", "--model", str(model_dir), "hello"]) == 2
    assert "outside the model directory" in capsys.readouterr().err


@pytest.mark.parametrize("kind, message", [("fifo", "g2p.json is a FIFO"),
                                           ("dev_zero", "outside the model directory")])
def test_special_file_as_g2p_json_is_refused(model_dir, kind, message):
    path = model_dir / G2P_FILE
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)
    got = _load_in_child(model_dir)
    assert got.startswith("ModelFormatError: ") and G2P_FILE in got and message in got, got


def test_oversized_g2p_json_is_refused_unread(model_dir):
    with open(model_dir / G2P_FILE, "r+b") as f:
        f.truncate(G2P_MAX_BYTES + 1)  # valid JSON followed by zero bytes, past the limit
    with pytest.raises(ModelFormatError, match=f"g2p.json is {G2P_MAX_BYTES + 1} bytes, more than"):
        Vocab.load(model_dir)


def test_missing_or_dangling_g2p_json(model_dir):
    (model_dir / G2P_FILE).unlink()
    with pytest.raises(ModelFormatError, match="g2p.json: missing"):
        Vocab.load(model_dir)
    os.symlink("gone.json", model_dir / G2P_FILE)  # a dangling link is reported, not taken as missing
    with pytest.raises(ModelFormatError, match="g2p.json does not exist"):
        Vocab.load(model_dir)
