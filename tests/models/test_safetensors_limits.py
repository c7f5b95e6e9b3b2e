"""seqjit.models.weights_file.read_safetensors against headers that declare more than the file holds
(issue 36): each refused by seqjit's own header check, naming the file and the tensor, before the
safetensors library reads anything (it is replaced here by a function that fails the test)."""
import json
import os
import signal
import struct

import numpy as np
import pytest

from seqjit.errors import ModelFormatError
from seqjit.models.weights_file import read_safetensors, write_safetensors


def write_raw(path, header: dict, data: bytes):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.fixture
def no_library_read(monkeypatch):
    import safetensors

    def refuse(*args, **kwargs):
        raise AssertionError("safetensors was asked to read a file seqjit's header check should refuse")
    monkeypatch.setattr(safetensors, "safe_open", refuse)


def f32(shape, begin, end):
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


CASES = {  # id: (header, what the error says after the file name)
    "shape-100000x100000": ({"w": f32([100000, 100000], 0, 16)},
                            r"tensor 'w' declares shape \[100000, 100000\] of F32 \(40000000000 bytes\).*span 16"),
    "shape-product-overflows-int64": ({"w": f32([2**62, 2**62, 4], 0, 16)}, r"tensor 'w' .*over 2\*\*64 bytes"),
    "offsets-past-the-end": ({"w": f32([400], 0, 1600)}, r"tensor 'w' has data_offsets \[0, 1600\], past the 16"),
    "offsets-reversed": ({"w": f32([0], 16, 0)}, r"tensor 'w' .*data_offsets \[16, 0\] span -16 bytes"),
    "overlapping": ({"a": f32([4], 0, 16), "b": f32([2], 8, 16)}, r"tensor 'b' \(data_offsets \[8, 16\]\) overlaps"),
    "same-bytes-twice": ({"a": f32([4], 0, 16), "b": f32([4], 0, 16)}, r"tensor 'b' .*overlaps the tensor before"),
    "gap": ({"a": f32([2], 8, 16)}, r"tensor 'a' .*leaves bytes 0 to 8 unused"),
    "bytes-no-tensor-names": ({"a": f32([2], 0, 8)}, r"the tensors' data ends at byte 8 of the 16"),
    "too-many-dims": ({"a": f32([1] * 40, 0, 4)}, r"tensor 'a' has 40 dimensions"),
}


@pytest.mark.parametrize("header,message", CASES.values(), ids=CASES.keys())
def test_a_header_declaring_more_than_the_file_is_refused_before_reading(tmp_path, no_library_read, header, message):
    path = write_raw(tmp_path / "bad.safetensors", header, bytes(16))
    with pytest.raises(ModelFormatError, match=r"bad\.safetensors: " + message):
        read_safetensors(path, verify=False)


def test_a_header_length_of_2_to_the_63_is_refused(tmp_path, no_library_read):
    path = tmp_path / "long.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 63) + b"{}")
    with pytest.raises(ModelFormatError, match=r"long\.safetensors .*header claims 9223372036854775808 bytes"):
        read_safetensors(path, verify=False)


def test_a_fifo_is_refused_without_blocking(tmp_path, no_library_read):
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    signal.alarm(5)  # a reader that opens the FIFO blocks: the alarm ends the test instead
    try:
        with pytest.raises(ModelFormatError, match=r"model\.safetensors is a FIFO"):
            read_safetensors(fifo, verify=False)
    finally:
        signal.alarm(0)


def test_a_valid_file_still_reads(tmp_path):
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros((2, 0, 3), np.int64),
               "c": np.array([True, False])}
    write_safetensors(tmp_path / "ok.safetensors", tensors)
    got, _ = read_safetensors(tmp_path / "ok.safetensors")
    assert sorted(got) == sorted(tensors)
    for name, value in tensors.items():
        assert got[name].dtype == value.dtype
        np.testing.assert_array_equal(got[name], value)
