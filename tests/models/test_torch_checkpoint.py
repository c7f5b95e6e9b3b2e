"""seqjit.convert.torch_checkpoint against torch.load: the same objects from the files torch.save
writes, and files naming anything else refused without running it."""
import argparse
import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

from seqjit.convert.torch_checkpoint import read_checkpoint
from seqjit.errors import ModelFormatError

torch = pytest.importorskip("torch")


def _same(ours, theirs):
    if isinstance(theirs, (torch.device, torch.dtype)):
        assert str(ours) == str(theirs) and not isinstance(ours, (torch.device, torch.dtype))
    elif isinstance(theirs, torch.Size):
        assert type(ours) is tuple and ours == tuple(theirs)
    elif isinstance(theirs, (set, bytes, bytearray, bool, float, int, complex)):
        assert type(ours) is type(theirs) and ours == theirs
    elif isinstance(theirs, torch.Tensor):
        expected = theirs.float().numpy() if theirs.dtype == torch.bfloat16 else theirs.numpy()
        assert isinstance(ours, np.ndarray) and ours.dtype == expected.dtype and ours.shape == expected.shape
        np.testing.assert_array_equal(ours, expected)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs)
        for key in theirs:
            _same(ours[key], theirs[key])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    elif isinstance(theirs, argparse.Namespace):
        assert isinstance(ours, argparse.Namespace) and vars(ours) == vars(theirs)
    else:
        assert ours == theirs


def test_a_checkpoint_reads_as_torch_load_reads_it(tmp_path):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 10, generator=g)
    state = collections.OrderedDict([
        ("weight", torch.randn(4, 3, generator=g)),
        ("transposed", base.t()),                    # strides (1, 10): not contiguous
        ("slice", base[2:5, 3:7]),                   # an offset into a shared storage
        ("shared", base),                            # the same storage again
        ("half", torch.randn(5, generator=g).half()),
        ("bf16", torch.randn(7, generator=g).bfloat16()),
        ("double", torch.randn(2, 2, generator=g, dtype=torch.float64)),
        ("ids", torch.arange(9, dtype=torch.int64).reshape(3, 3)),
        ("mask", torch.tensor([True, False, True])),
        ("empty", torch.zeros(0, 4)),
        ("scalar", torch.tensor(2.5)),
        ("param", torch.nn.Parameter(torch.randn(3, generator=g))),
    ])
    ckpt = {"model_state": state, "steps": 12, "names": ["a", "b"], "pair": (1, 2.0), "none": None,
            "opt": argparse.Namespace(rnn_size=8, brnn=True, layers=[1, 2])}
    path = tmp_path / "model.pt"
    torch.save(ckpt, path)
    with torch.serialization.safe_globals([argparse.Namespace]):
        theirs = torch.load(path, map_location="cpu", weights_only=True)
    theirs["model_state"]["param"] = theirs["model_state"]["param"].detach()
    _same(read_checkpoint(path, namespace=True), theirs)


def _every_admitted_kind():
    g = torch.Generator().manual_seed(1)
    tensors = {str(dtype): (torch.randn(3, 2, generator=g) * 50).to(dtype) for dtype in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
        torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128, torch.uint16, torch.uint32,
        torch.uint64)}
    return {
        "tensors": tensors, "nested": {"a": {"b": [torch.ones(2), (torch.zeros(1), None)]}},
        "state": collections.OrderedDict(w=torch.arange(4.0)),
        "opt": argparse.Namespace(sets={1, 2}, pair=(1, None), flag=True, off=False,
                                  rate=0.25, big=2**70, negative=-(2**40), text="é", z=1.5 - 2j),
        "bytes": b"\x00\xffab", "bytearray": bytearray(b"\x01\x02"), "size": torch.Size([2, 3]),
        "devices": [torch.device("cpu"), torch.device("cuda", 1), torch.device("cuda:0")],
        "dtypes": [torch.float32, torch.bfloat16, torch.int64, torch.bool],
        "param": torch.nn.Parameter(torch.randn(2, generator=g)), "steps": 10**12, "inf": float("inf"),
    }


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_admitted_kind_reads_as_torch_load_reads_it(tmp_path, protocol):
    obj = _every_admitted_kind()
    obj["state"]._metadata = {"": {"version": 1}}  # as nn.Module.state_dict() sets it
    path = tmp_path / "kinds.pt"
    torch.save(obj, path, pickle_protocol=protocol)
    # torch.load(weights_only=True) reads protocol 2 only (it has no SHORT_BINBYTES, 3, nor FRAME, 4):
    # at 3 to 5 the reference is torch's full unpickler, on this file the test wrote itself
    with torch.serialization.safe_globals([argparse.Namespace]):
        theirs = torch.load(path, map_location="cpu", weights_only=protocol == 2)
    theirs["param"] = theirs["param"].detach()
    theirs["tensors"] = {k: v.float() if v.dtype == torch.bfloat16 else v for k, v in theirs["tensors"].items()}
    for name in ("torch.uint16", "torch.uint32", "torch.uint64"):  # torch has no .numpy() for these
        theirs["tensors"][name] = theirs["tensors"][name].to(torch.int64)
    ours = read_checkpoint(path, namespace=True)
    for name in ("torch.uint16", "torch.uint32", "torch.uint64"):
        assert ours["tensors"][name].dtype == np.dtype(name[6:])
        ours["tensors"][name] = ours["tensors"][name].astype(np.int64)
    _same(ours, theirs)
    assert ours["state"]._metadata == theirs["state"]._metadata


def test_empty_bytes_at_protocol_2(tmp_path):
    # pickled as builtins.bytes() (torch.load(weights_only=True) refuses it; seqjit reads it)
    path = tmp_path / "empty.pt"
    torch.save({"b": b"", "a": b"a"}, path, pickle_protocol=2)
    assert read_checkpoint(path) == {"b": b"", "a": b"a"}


def test_options_namespace_is_admitted_only_when_asked(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"opt": argparse.Namespace(a=1)}, path)
    with pytest.raises(ModelFormatError, match="argparse.Namespace"):
        read_checkpoint(path)


class _Payload:
    def __reduce__(self):
        return (os.system, ("echo ran > " + str(_Payload.marker),))


def test_a_file_naming_code_is_refused_and_nothing_runs(tmp_path):
    _Payload.marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    torch.save({"model_state": {"w": torch.zeros(2)}, "x": _Payload()}, path)
    with pytest.raises(ModelFormatError, match=r"evil.pt.*(posix|os|nt)\.system"):
        read_checkpoint(path)
    assert not _Payload.marker.exists()


def test_a_tensor_reaching_past_its_storage_is_refused(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.arange(6, dtype=torch.float32)}, path)
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    name = next(n for n in entries if n.endswith("data.pkl"))
    data = entries[name]
    # the pickled size (6,) becomes (60,): the rebuilt view would read past the 6 stored floats
    assert data.count(b"K\x06\x85") == 1
    entries[name] = data.replace(b"K\x06\x85", b"K<\x85")
    broken = tmp_path / "broken.pt"
    with zipfile.ZipFile(broken, "w") as archive:
        for key, value in entries.items():
            archive.writestr(key, value)
    with pytest.raises(ModelFormatError, match="reaches past its storage"):
        read_checkpoint(broken)


def test_files_that_are_not_checkpoints_are_refused(tmp_path):
    legacy = tmp_path / "legacy.pt"
    legacy.write_bytes(pickle.dumps({"w": 1}))
    with pytest.raises(ModelFormatError, match="not a torch.save zip"):
        read_checkpoint(legacy)
    odd = tmp_path / "odd.pt"
    with zipfile.ZipFile(odd, "w") as archive:
        archive.writestr("x/other.txt", b"")
    with pytest.raises(ModelFormatError, match="data.pkl"):
        read_checkpoint(odd)
    truncated = tmp_path / "truncated.pt"
    torch.save({"w": torch.zeros(3)}, truncated)
    with zipfile.ZipFile(truncated) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}
    name = next(n for n in entries if n.endswith("data.pkl"))
    entries[name] = entries[name][:-5]
    with zipfile.ZipFile(truncated, "w") as archive:
        for key, value in entries.items():
            archive.writestr(key, value)
    with pytest.raises(ModelFormatError, match="truncated.pt"):
        read_checkpoint(truncated)
