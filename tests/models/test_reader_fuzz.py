"""Property-based (issue 36): the checkpoint reader and the safetensors reader, given mutated valid
files (bytes flipped, inserted, cut; the pickle inside a checkpoint edited and re-zipped so its CRC
holds; random opcode streams), either read or raise a seqjit error, within a time bound and with a
traced peak allocation of at most a fixed multiple of the file's size plus a constant.

A read of a mutated file that succeeds must give plain data; where the mutation leaves every member's
bytes intact (zipfile checks their CRC-32, and safetensors files carry seqjit's checksums) it must
give exactly what was saved."""
import argparse
import io
import struct
import tempfile
import threading
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from seqjit.convert.torch_checkpoint import Device, DType, read_checkpoint
from seqjit.errors import ModelFormatError
from seqjit.models.weights_file import read_safetensors, write_safetensors

torch = pytest.importorskip("torch")

TIME_LIMIT_S = 3.0
#: tracemalloc peak allowed: this many times the file's bytes, plus MEMORY_SLACK (Python objects cost up
#: to ~200 bytes per pickle opcode: an EMPTY_SET is one byte)
MEMORY_FACTOR, MEMORY_SLACK = 256, 4 << 20
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _checkpoint_bytes() -> bytes:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=g)
    obj = {"model_state": {"w": base, "t": base.t(), "b": torch.arange(5, dtype=torch.int64),
                           "h": torch.randn(3, generator=g).half()},
           "opt": argparse.Namespace(layers=2, sets={"a", "b"}, pair=(1, None), rate=0.5, big=2**70),
           "vocab": {"src": ["<unk>", "a", "b"]}, "raw": b"\x00\xff", "device": torch.device("cpu"),
           "dtype": torch.float32, "steps": 12}
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


CHECKPOINT = _checkpoint_bytes()
with zipfile.ZipFile(io.BytesIO(CHECKPOINT)) as _archive:
    MEMBERS = {name: _archive.read(name) for name in _archive.namelist()}
PICKLE_NAME = next(name for name in MEMBERS if name.endswith("/data.pkl"))
with tempfile.TemporaryDirectory() as _d:
    (Path(_d) / "base.pt").write_bytes(CHECKPOINT)
    EXPECTED = read_checkpoint(Path(_d) / "base.pt", namespace=True)
    write_safetensors(Path(_d) / "base.safetensors", {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1, -2], np.int64),
        "c": np.zeros((2, 0, 3), np.float16), "d": np.array([True, False, True])})
    SAFETENSORS = (Path(_d) / "base.safetensors").read_bytes()
    ST_EXPECTED = read_safetensors(Path(_d) / "base.safetensors")[0]


def _bounded(read, size: int):
    """``read()`` in a thread: the result, or the seqjit error it raised; no hang, no raw exception,
    within TIME_LIMIT_S and the memory bound."""
    box = {}

    def run():
        tracemalloc.start()
        try:
            box["value"] = read()
        except BaseException as exc:  # noqa: BLE001 - judged below
            box["exc"] = exc
        finally:
            box["peak"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()

    start = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(TIME_LIMIT_S * 4)
    assert not thread.is_alive(), "the read hangs"
    assert time.perf_counter() - start < TIME_LIMIT_S, f"the read took {time.perf_counter() - start:.1f} s"
    assert box["peak"] <= MEMORY_FACTOR * size + MEMORY_SLACK, f"the read traced {box['peak']} bytes for {size}"
    exc = box.get("exc")
    if exc is not None:
        if not isinstance(exc, ModelFormatError):
            raise AssertionError(f"raw {type(exc).__name__} instead of a ModelFormatError") from exc
        assert str(exc)
        return exc
    return box["value"]


def _equal(a, b) -> bool:
    if isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(b, dict):
        return isinstance(a, dict) and list(a) == list(b) and all(_equal(a[k], b[k]) for k in b)
    if isinstance(b, argparse.Namespace):
        return isinstance(a, argparse.Namespace) and _equal(vars(a), vars(b))
    if isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    return type(a) is type(b) and a == b


def _plain(value, depth=0) -> bool:
    assert depth < 200
    if isinstance(value, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    if isinstance(value, argparse.Namespace):
        return _plain(vars(value), depth + 1)
    if isinstance(value, (list, tuple, set)):
        return all(_plain(v, depth + 1) for v in value)
    return isinstance(value, (str, bytes, bytearray, int, float, complex, type(None), np.ndarray, DType, Device))


def _read_checkpoint_bytes(raw: bytes):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "model.pt"
        path.write_bytes(raw)
        return _bounded(lambda: read_checkpoint(path, namespace=True), len(raw))


def _rezip(pickle_bytes: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, raw in MEMBERS.items():
            archive.writestr(name, pickle_bytes if name == PICKLE_NAME else raw)
    return buf.getvalue()


def _mutate(data, raw: bytes) -> bytes:
    raw = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        kind = data.draw(st.sampled_from(["flip", "insert", "cut", "set"]), label="kind")
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)), label="at")
        if kind == "flip" and raw:
            raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        elif kind == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=16), label="bytes")
        elif kind == "cut":
            del raw[at:at + data.draw(st.integers(1, 64), label="length")]
        elif raw:
            raw[at] = data.draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x01]), label="value")
    return bytes(raw)


@FUZZ
@given(data=st.data())
def test_checkpoint_file_mutations(data):
    mutated = _mutate(data, CHECKPOINT)
    result = _read_checkpoint_bytes(mutated)
    if not isinstance(result, ModelFormatError):  # the members' CRC-32s held: it is what was saved
        assert _equal(result, EXPECTED)


@FUZZ
@given(data=st.data())
def test_checkpoint_pickle_mutations(data):
    result = _read_checkpoint_bytes(_rezip(_mutate(data, MEMBERS[PICKLE_NAME])))
    if not isinstance(result, ModelFormatError):
        assert _plain(result)


#: pickle opcodes with arguments, and globals, that random streams are made of
_PIECES = [b"(", b"0", b"1", b"2", b"N", b"\x88", b"\x89", b"K\x03", b"M\xff\xff", b"J\xff\xff\xff\xff",
           b"\x8a\x09" + b"\xff" * 9, b"G" + struct.pack(">d", 1.5), b"X\x01\x00\x00\x00a", b"\x8c\x01b",
           b"C\x02ab", b"\x96\x01\x00\x00\x00\x00\x00\x00\x00z", b"]", b"a", b"e", b"l", b")", b"t", b"\x85",
           b"\x86", b"\x87", b"}", b"d", b"s", b"u", b"\x8f", b"\x90", b"R", b"\x81", b"b", b"Q", b"q\x00",
           b"q\x01", b"h\x00", b"h\x01", b"\x94", b"ccollections\nOrderedDict\n", b"cargparse\nNamespace\n",
           b"ctorch._utils\n_rebuild_tensor_v2\n", b"ctorch\nFloatStorage\n", b"ctorch\nSize\n", b"c__builtin__\nset\n",
           b"c_codecs\nencode\n", b"ctorch\ndevice\n", b"X\x07\x00\x00\x00storage", b"X\x01\x00\x00\x000",
           b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00latin1", b"X\x06\x00\x00\x00__eq__",
           b"B\x00\x00\x00\xff", b"\x8e" + struct.pack("<Q", 1 << 40), b"\x95" + struct.pack("<Q", 1 << 50)]


@FUZZ
@given(pieces=st.lists(st.sampled_from(_PIECES), max_size=60), end=st.booleans())
def test_random_opcode_streams(pieces, end):
    stream = b"\x80\x02" + b"".join(pieces) + (b"." if end else b"")
    result = _read_checkpoint_bytes(_rezip(stream))
    if not isinstance(result, ModelFormatError):
        assert _plain(result)


@FUZZ
@given(data=st.data())
def test_safetensors_mutations(data):
    mutated = _mutate(data, SAFETENSORS)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "model.safetensors"
        path.write_bytes(mutated)
        result = _bounded(lambda: read_safetensors(path), len(mutated))
    if not isinstance(result, ModelFormatError):  # the checksums held
        tensors, _ = result
        assert sorted(tensors) == sorted(ST_EXPECTED)
        assert all(_equal(tensors[k], v) for k, v in ST_EXPECTED.items())
