"""Read a PyTorch checkpoint (``torch.save``'s zip format) into NumPy arrays, without torch and without
running any code from the file.

A ``torch.save`` file is a zip archive: ``<name>/data.pkl`` pickles the object (dicts, lists, numbers,
strings, and tensors as references to storages), and ``<name>/data/<key>`` holds each storage's raw
bytes. Unpickling can call any importable function the file names, so this reader admits a fixed list
of names, each mapped to a stand-in of our own (:data:`_ADMITTED`): a tensor becomes a NumPy array
built from its storage with its offset, shape and strides checked against the storage's length, an
``OrderedDict`` itself, OpenNMT-py's ``argparse.Namespace`` (only when asked for) a Namespace, and
every other name is a :class:`~seqjit.errors.ModelFormatError` naming it: the same set of objects
``torch.load(weights_only=True)`` builds, for the checkpoints JoeyNMT and OpenNMT-py write.
"""
from __future__ import annotations

import argparse
import collections
import pickle
import zipfile
from pathlib import Path

import numpy as np

from seqjit.errors import ModelFormatError

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}


class _StorageType:
    """What ``torch.FloatStorage`` and its kin stand for in the pickle: the element type."""

    def __init__(self, name: str):
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


class _Storage:
    def __init__(self, values: np.ndarray):
        self.values = values


def _rebuild_tensor(storage, offset, size, stride, *_ignored):
    """torch._utils._rebuild_tensor_v2: the array at ``offset`` with ``size`` and element ``stride``,
    copied out of the storage once its extent is known to lie inside it."""
    if not isinstance(storage, _Storage):
        raise ModelFormatError("a tensor in the checkpoint does not refer to a storage")
    values = storage.values
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride) or int(offset) < 0 or any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise ModelFormatError(f"a tensor in the checkpoint has a bad layout (size {size}, stride {stride}, offset {offset})")
    if 0 in size:
        return np.zeros(size, dtype=values.dtype)
    last = int(offset) + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= values.size:
        raise ModelFormatError(f"a tensor in the checkpoint (size {size}, stride {stride}, offset {offset}) reaches "
                               f"past its storage of {values.size} elements")
    view = np.lib.stride_tricks.as_strided(values[int(offset):], shape=size,
                                           strides=tuple(s * values.itemsize for s in stride), writeable=False)
    return np.array(view)


def _rebuild_parameter(data, *_ignored):
    return data


_ADMITTED = {
    ("collections", "OrderedDict"): collections.OrderedDict,  # a state dict's own _metadata is set on it
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch", "Size"): tuple,
    ("builtins", "set"): set, ("__builtin__", "set"): set,  # OpenNMT-py 3.5's options hold sets
    **{("torch", name): _StorageType(name) for name in _STORAGE_DTYPES},
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive: zipfile.ZipFile, prefix: str, path: Path, namespace: bool):
        super().__init__(file)
        self._archive, self._prefix, self._path = archive, prefix, path
        self._namespace, self._storages = namespace, {}

    def find_class(self, module, name):
        if self._namespace and (module, name) == ("argparse", "Namespace"):
            return argparse.Namespace
        if (module, name) not in _ADMITTED:
            raise ModelFormatError(f"{self._path}: the checkpoint names {module}.{name}, which seqjit does not admit "
                                   "(it reads tensors, plain containers and OpenNMT-py's options only; nothing runs)")
        return _ADMITTED[(module, name)]

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise ModelFormatError(f"{self._path}: an unknown reference in the checkpoint ({str(pid)[:80]})")
        kind, key = pid[1], str(pid[2])
        if key not in self._storages:
            try:
                raw = self._archive.read(f"{self._prefix}data/{key}")
            except KeyError:
                raise ModelFormatError(f"{self._path}: storage {key} is missing from the archive") from None
            dtype = np.uint16 if kind.dtype == "bfloat16" else np.dtype(kind.dtype)
            if len(raw) % np.dtype(dtype).itemsize:
                raise ModelFormatError(f"{self._path}: storage {key} is not a whole number of {kind.name} elements")
            values = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
            if kind.dtype == "bfloat16":
                values = (values.astype(np.uint32) << 16).view(np.float32)
            self._storages[key] = _Storage(values.astype(values.dtype.newbyteorder("=")))
        return self._storages[key]


def read_checkpoint(path, *, namespace: bool = False):
    """The object ``torch.save`` wrote to ``path``, its tensors as NumPy arrays (module docstring).
    ``namespace``: admit ``argparse.Namespace`` (OpenNMT-py's options) as plain data."""
    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise ModelFormatError(f"{path}: not a torch.save zip archive (the legacy pre-1.6 format and other files are "
                               "not read; export the state dict to .safetensors)")
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
            if len(pickles) != 1:
                raise ModelFormatError(f"{path}: no single '<name>/data.pkl' in the archive")
            prefix = pickles[0][: -len("data.pkl")]
            order = f"{prefix}byteorder"
            if order in archive.namelist() and archive.read(order).strip() != b"little":
                raise ModelFormatError(f"{path}: big-endian checkpoints are not read")
            with archive.open(pickles[0]) as file:
                return _Unpickler(file, archive, prefix, path, namespace).load()
    except ModelFormatError:
        raise
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, ValueError, TypeError, KeyError,
            AttributeError, IndexError) as exc:
        raise ModelFormatError(f"{path}: not a checkpoint seqjit can read ({type(exc).__name__}: {str(exc)[:200]})") from None
