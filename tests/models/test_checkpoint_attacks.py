"""seqjit.convert.torch_checkpoint against crafted checkpoints (issue 36): a file that would change how
later files are read, allocation bombs (a stride-0 expand, length claims, a zip bomb, sizes the
archive contradicts), and paths that are not regular files. Each is refused with a ModelFormatError
naming the file, fast, without allocating what it claims; a normal file read afterwards is unaffected."""
import argparse
import io
import os
import resource
import signal
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from contextlib import contextmanager

import numpy as np
import pytest

from seqjit.convert.torch_checkpoint import read_checkpoint
from seqjit.errors import ModelFormatError

torch = pytest.importorskip("torch")


def write_archive(path, pickle_bytes: bytes, storages=None, compression=zipfile.ZIP_STORED):
    """A torch.save-shaped zip: ``archive/data.pkl``, ``archive/byteorder``, ``archive/data/<key>``."""
    with zipfile.ZipFile(path, "w", compression) as archive:
        archive.writestr("archive/data.pkl", pickle_bytes)
        archive.writestr("archive/byteorder", b"little")
        for key, raw in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", raw)
    return path


def unicode(text: str) -> bytes:  # BINUNICODE
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


@contextmanager
def deadline(seconds: float):
    """Fail (TimeoutError) instead of hanging when the block blocks or loops."""
    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def saved(tmp_path, name, obj):
    path = tmp_path / name
    torch.save(obj, path)
    return path


# (a) BUILD on an admitted class or stand-in ---------------------------------------------------------

# GLOBAL argparse.Namespace, BUILD (None, {"__eq__": 1}): Python's unpickler sets the attribute on the class
MUTATE_NAMESPACE = b"\x80\x02cargparse\nNamespace\nN}" + unicode("__eq__") + b"K\x01s\x86b."
# GLOBAL torch.FloatStorage, BUILD (None, {"dtype": "float64"}): the storage type's element type
MUTATE_STORAGE = b"\x80\x02ctorch\nFloatStorage\nN}" + unicode("dtype") + unicode("float64") + b"s\x86b."
# an OrderedDict's own state with a dunder name: refused too (only plain attribute names)
DUNDER_STATE = b"\x80\x02ccollections\nOrderedDict\n)R}" + unicode("__class__") + b"K\x01sb."


@pytest.mark.parametrize("crafted", [MUTATE_NAMESPACE, MUTATE_STORAGE, DUNDER_STATE],
                         ids=["namespace-eq", "storage-dtype", "dunder-state"])
def test_build_never_changes_a_class_or_stand_in(tmp_path, crafted):
    original_eq = argparse.Namespace.__dict__.get("__eq__")
    path = write_archive(tmp_path / "crafted.pt", crafted)
    try:
        with pytest.raises(ModelFormatError, match=r"crafted\.pt.*BUILD"):
            read_checkpoint(path, namespace=True)
        assert argparse.Namespace.__dict__.get("__eq__") is original_eq
        normal = saved(tmp_path, "normal.pt", {"w": torch.arange(4, dtype=torch.float32),
                                               "opt": argparse.Namespace(a=1)})
        ours = read_checkpoint(normal, namespace=True)
        assert ours["w"].dtype == np.float32
        np.testing.assert_array_equal(ours["w"], np.arange(4, dtype=np.float32))
        assert ours["opt"] == argparse.Namespace(a=1)
    finally:
        if original_eq is not None:  # the code before issue 36 changed the class itself: put it back
            argparse.Namespace.__eq__ = original_eq


REBUILD = b"ctorch._utils\n_rebuild_tensor_v2\n"
STAND_IN_VALUES = {
    "the-object": b"\x80\x02" + REBUILD + b".",
    "in-a-list": b"\x80\x02]" + REBUILD + b"a.",
    "as-an-ordered-dict-attribute": b"\x80\x02ccollections\nOrderedDict\n)R}" + unicode("_metadata") + REBUILD + b"sb.",
}


@pytest.mark.parametrize("crafted", STAND_IN_VALUES.values(), ids=STAND_IN_VALUES.keys())
def test_a_stand_in_is_never_a_value(tmp_path, crafted):
    # a stand-in returned as a value would let the caller reach the reader's internals
    path = write_archive(tmp_path / "value.pt", crafted)
    with pytest.raises(ModelFormatError, match=r"value\.pt.*_rebuild_tensor_v2 as a value"):
        read_checkpoint(path)


# (b) a stride-0 expand: 1.5 kB on disk, terabytes if copied -------------------------------------------

def test_a_stride_zero_expand_is_refused_without_allocating(tmp_path):
    path = saved(tmp_path, "expand.pt", {"w": torch.zeros(1).expand(10**6, 10**6)})
    assert path.stat().st_size < 4096
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError, match=r"expand\.pt.*\(1000000, 1000000\).*stride-0"):
            read_checkpoint(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_small_broadcast_still_reads_as_torch_load_reads_it(tmp_path):
    path = saved(tmp_path, "bias.pt", {"b": torch.arange(3.0).expand(4, 3)})
    np.testing.assert_array_equal(read_checkpoint(path)["b"], torch.load(path, weights_only=True)["b"].numpy())


# (c) length claims beyond the data ------------------------------------------------------------------

@pytest.mark.parametrize("opcode", [b"\x8e", b"\x96", b"\x8d"], ids=["BINBYTES8", "BYTEARRAY8", "BINUNICODE8"])
def test_a_length_claim_beyond_the_pickle_is_refused(tmp_path, opcode):
    path = write_archive(tmp_path / "claim.pt", b"\x80\x05" + opcode + struct.pack("<Q", 1 << 40) + b"abc.")
    tracemalloc.start()
    try:
        with deadline(10), pytest.raises(ModelFormatError, match=r"claim\.pt.*1099511627776 bytes"):
            read_checkpoint(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


# (d) archive sizes: a zip bomb, a size the archive contradicts ------------------------------------------

def test_a_zip_bomb_is_refused_before_inflating(tmp_path):
    body = b"\x80\x02B" + struct.pack("<I", 20 << 20) + bytes(20 << 20) + b"."  # 20 MiB of zeros, pickled
    path = write_archive(tmp_path / "bomb.pt", body, compression=zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError, match=r"bomb\.pt.*zip bomb"):
            read_checkpoint(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def test_a_member_size_past_the_file_is_refused(tmp_path):
    path = saved(tmp_path, "sizes.pt", {"w": torch.zeros(3)})
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as archive:
        info = archive.getinfo("sizes/data.pkl")
    central = raw.index(b"PK\x01\x02")  # the central directory's first entry
    assert raw[central + 46:central + 46 + len(info.filename)] == info.filename.encode()  # the first entry
    edited = tmp_path / "edited.pt"
    struct.pack_into("<I", raw, central + 24, 0xFFFF0000)  # its uncompressed size: 4 GiB
    edited.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match=r"edited\.pt: member sizes/data\.pkl claims 4294901760 bytes"):
        read_checkpoint(edited)
    struct.pack_into("<I", raw, central + 24, info.file_size)
    struct.pack_into("<I", raw, central + 20, 0xFFFF0000)  # its compressed size: past the end of the file
    edited.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match=r"edited\.pt: member sizes/data\.pkl .* reaches past the end"):
        read_checkpoint(edited)


@pytest.mark.parametrize("field,value,message", [
    (10, 99, "compressed with method 99"),  # AES: zipfile raises NotImplementedError
    (8, 1, "is encrypted"),  # flag bit 0: zipfile raises RuntimeError (a password is needed)
], ids=["method-99", "encrypted"])
def test_members_zipfile_cannot_read_are_typed_errors(tmp_path, field, value, message):
    path = saved(tmp_path, "odd.pt", {"w": torch.zeros(3)})
    raw = bytearray(path.read_bytes())
    at = 0
    while (at := raw.find(b"PK\x01\x02", at)) >= 0:  # every central directory entry
        struct.pack_into("<H", raw, at + field, value)
        at += 4
    at = 0
    while (at := raw.find(b"PK\x03\x04", at)) >= 0:  # and every local header (2 bytes earlier there)
        struct.pack_into("<H", raw, at + field - 2, value)
        at += 4
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match=r"odd\.pt: member odd/.* " + message):
        read_checkpoint(path)


# (e) paths that are not regular files ---------------------------------------------------------------

def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "model.pt"
    os.mkfifo(fifo)
    with deadline(5), pytest.raises(ModelFormatError, match=r"model\.pt is a FIFO"):
        read_checkpoint(fifo)


def test_dev_zero_is_refused_without_reading(tmp_path):
    """In a child process under a 2 GiB address-space limit: a reader that reads /dev/zero reads forever
    inside one C call (no signal gets through), so the limit, not an alarm, ends it."""
    link = tmp_path / "model.pt"
    os.symlink("/dev/zero", link)
    script = ("import sys\nfrom seqjit.convert.torch_checkpoint import read_checkpoint\n"
              "from seqjit.errors import ModelFormatError\n"
              "for path in sys.argv[1:]:\n"
              "    try:\n        read_checkpoint(path)\n    except ModelFormatError as exc:\n        print(exc)\n")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", script, str(link), "/dev/zero"], capture_output=True, text=True,
                          timeout=60, preexec_fn=limit, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [f"{link} is a device; seqjit reads model files only from regular files",
                                        "/dev/zero is a device; seqjit reads model files only from regular files"]


# (c') a few bytes that hash or print in exponential time: DUP doubles a tuple's tree at every level

def _doubling_tuple(levels: int) -> bytes:
    return b"K\x01" + b"2\x86" * levels  # BININT1 1, then DUP + TUPLE2 `levels` times: 2**levels leaves


EXPONENTIAL = {
    "dict-key": b"\x80\x02}" + _doubling_tuple(60) + b"K\x00s.",  # {tuple: 0}: hashing walks 2**60 leaves
    "set-item": b"\x80\x04\x8f(" + _doubling_tuple(60) + b"\x90.",  # ADDITEMS
    "set-call": b"\x80\x02c__builtin__\nset\n]" + _doubling_tuple(60) + b"a\x85R.",
    "shown-in-an-error": b"\x80\x02" + _doubling_tuple(60) + b"Q.",  # a persistent id printed in the error
}


@pytest.mark.parametrize("crafted", EXPONENTIAL.values(), ids=EXPONENTIAL.keys())
def test_a_shared_subtree_bomb_is_refused_in_linear_time(tmp_path, crafted):
    path = write_archive(tmp_path / "tree.pt", crafted)
    with deadline(10), pytest.raises(ModelFormatError, match=r"tree\.pt"):
        read_checkpoint(path)
