"""Read a PyTorch checkpoint (``torch.save``'s zip format) into NumPy arrays, without torch and without
running any code from the file (:func:`read_checkpoint`).

A ``torch.save`` file is a zip archive: ``<name>/data.pkl`` pickles the object (dicts, lists, numbers,
strings, and tensors as references to storages), and ``<name>/data/<key>`` holds each storage's raw
bytes. The pickle is read by :mod:`seqjit.convert.restricted_pickle`, which calls nothing but the
stand-ins made here afresh for each read (:func:`_admitted`): the globals ``torch.load(weights_only=True)``
admits for the files JoeyNMT and OpenNMT-py write. A tensor becomes a NumPy array copied from its
storage, an ``OrderedDict``, set, complex, bytes or bytearray itself, ``torch.Size`` a tuple, a
``torch.device`` a :class:`Device`, a dtype such as ``torch.float32`` a :class:`DType`, and
OpenNMT-py's ``argparse.Namespace`` (only when asked for) a Namespace. Every other name is refused.

Nothing the file claims is trusted before it is checked against the file itself:

- the path must be a regular file (a FIFO or ``/dev/zero`` is refused at once, never read);
- the archive: one ``<name>/`` folder holding only the members ``torch.save`` writes; no member
  encrypted or compressed other than stored/deflated (``torch.save`` stores), none reaching past the
  end of the file, and the uncompressed sizes they declare, together, at most the file's size
  (a zip bomb, or members overlapping one another, claim more); zipfile's own errors are caught;
- every storage's length a whole number of its elements and equal to the count its reference states;
  every member a tensor refers to has one element type; no storage is left unused;
- a tensor's offset, shape and strides lie inside its storage. Tensors are copied out of their
  storages, so each array owns its memory as ``torch.load``'s tensors do. A view whose strides
  overlap (a stride-0 ``expand``) would copy to more than its storage holds: one copying to more
  than ``EXPAND_FACTOR`` times its storage plus ``EXPAND_SLACK`` bytes is refused naming its shape
  and storage (``torch.zeros(1).expand(10**6, 10**6)`` saves to 1.5 kB and copies to 4 TB); a
  read-only view instead would only move that allocation to the first caller that copies it. All
  arrays together are at most ``TOTAL_FACTOR`` times the file's size plus ``EXPAND_SLACK`` bytes;
- the object read is plain data: no stand-in as a value, no cycle, nesting at most ``MAX_DEPTH``,
  dict keys and set items scalars or flat tuples of them (hashing costs linear time).

Besides what ``torch.load(weights_only=True)`` reads, ``b""`` pickled at protocol 2 (as
``builtins.bytes()``) and protocol 3-5 pickles (which it refuses: SHORT_BINBYTES, FRAME) are read;
tensors of types NumPy lacks (float8, quantized) and tensor subclasses are refused.

Every problem is a :class:`~seqjit.errors.ModelFormatError` naming the file.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import re
import zipfile
import zlib
from pathlib import Path

import numpy as np

from seqjit.convert import restricted_pickle
from seqjit.convert.restricted_pickle import StandIn, flat_key, shown
from seqjit.errors import ModelFormatError
from seqjit.models.files import open_regular

#: an overlapping view is copied only up to this many times its storage's bytes (plus EXPAND_SLACK)
EXPAND_FACTOR = 4
EXPAND_SLACK = 1 << 16
#: all arrays of one checkpoint together: at most this many times the file's bytes (plus EXPAND_SLACK);
#: tied weights copy a storage twice and bfloat16 storages are widened to float32
TOTAL_FACTOR = 8
#: the deepest nesting of containers in a checkpoint's object
MAX_DEPTH = 100

#: storage type -> NumPy element type ("bfloat16": 16-bit words widened to float32)
_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "UInt16Storage": "uint16", "UInt32Storage": "uint32",
    "UInt64Storage": "uint64",
}
_DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
                "complex64", "complex128", "uint16", "uint32", "uint64")
#: the members torch.save writes besides data.pkl and data/<key>
_META_MEMBERS = ("byteorder", "version", ".format_version", ".storage_alignment", ".data/version",
                 ".data/serialization_id")


@dataclasses.dataclass(frozen=True)
class DType:
    """A ``torch.<name>`` dtype object held in the checkpoint (``str()`` as torch prints it)."""

    name: str

    def __str__(self):
        return f"torch.{self.name}"


@dataclasses.dataclass(frozen=True)
class Device:
    """A ``torch.device`` held in the checkpoint (``str()`` as torch prints it)."""

    type: str
    index: int | None = None

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


_KEY_TYPES = (str, bytes, int, float, complex, bool, type(None), DType, Device)


class _Storage:
    """A storage's bytes, and the arrays of its element type made from them (bfloat16 widened)."""

    __slots__ = ("key", "raw", "typed")

    def __init__(self, key: str, raw: bytes):
        self.key, self.raw, self.typed = key, raw, {}

    def values(self, kind: str) -> np.ndarray:
        if kind not in self.typed:
            dtype = np.dtype("uint16" if kind == "bfloat16" else kind).newbyteorder("<")
            values = np.frombuffer(self.raw, dtype=dtype, count=len(self.raw) // dtype.itemsize)
            if kind == "bfloat16":
                values = (values.astype(np.uint32) << 16).view(np.float32)
            self.typed[kind] = values.astype(values.dtype.newbyteorder("="), copy=False)
        return self.typed[kind]


class _Typed:
    """A typed storage reference (``_rebuild_tensor_v2``): the storage and its element type."""

    __slots__ = ("storage", "kind")

    def __init__(self, storage: _Storage, kind: str):
        self.storage, self.kind = storage, kind


class _Read:
    """The state of one read: the archive, the storages loaded, the bytes of arrays made so far."""

    def __init__(self, path: Path, archive: zipfile.ZipFile, prefix: str, size: int, namespace: bool):
        self.path, self.archive, self.prefix, self.size = path, archive, prefix, size
        self.storages, self.kinds, self.budget = {}, {}, TOTAL_FACTOR * size + EXPAND_SLACK
        self.globals = _admitted(self, namespace)

    def fail(self, what: str):
        raise ModelFormatError(f"{self.path}: {what}")

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], StandIn)
                and pid[1].name in self.kinds and type(pid[2]) is str and type(pid[4]) is int):
            self.fail(f"an unknown reference in the checkpoint ({shown(pid)})")
        kind_name, key, numel = pid[1].name, pid[2], pid[4]
        kind = self.kinds[kind_name]
        itemsize = 1 if kind is None else np.dtype("uint16" if kind == "bfloat16" else kind).itemsize
        if key not in self.storages:
            member = f"{self.prefix}data/{key}"
            if member not in self.archive.NameToInfo:
                self.fail(f"storage {shown(key)} is missing from the archive")
            raw = self.archive.read(member)
            if len(raw) != numel * itemsize:
                self.fail(f"storage {key} holds {len(raw)} bytes, not the {shown(numel)} {kind_name} elements its "
                          "reference states")
            self.storages[key] = (_Storage(key, raw), kind_name)
        storage, first = self.storages[key]
        if first != kind_name:
            self.fail(f"storage {key} is referred to as both {first} and {kind_name}")
        return storage if kind is None else _Typed(storage, kind)

    def rebuild_tensor(self, storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
        """torch._utils._rebuild_tensor_v2: a copy of the elements ``offset``, ``size`` and ``stride``
        select in ``storage``, once they are known to lie inside it (module docstring)."""
        if not isinstance(storage, _Typed):
            self.fail("a tensor in the checkpoint does not refer to a typed storage")
        return self._tensor(storage.storage, storage.storage.values(storage.kind), offset, size, stride)

    def rebuild_tensor_v3(self, storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
        """torch._utils._rebuild_tensor_v3: as v2, on an untyped storage with the element type given."""
        if not isinstance(storage, _Storage) or not isinstance(dtype, DType):
            self.fail("a tensor in the checkpoint does not refer to an untyped storage and a dtype")
        if dtype.name not in _DTYPE_NAMES:
            self.fail(f"a tensor on storage {storage.key} has dtype {dtype}, which seqjit does not read")
        values = storage.values(dtype.name)
        if len(storage.raw) != values.size * (2 if dtype.name == "bfloat16" else values.itemsize):
            self.fail(f"storage {storage.key} is not a whole number of {dtype} elements")
        return self._tensor(storage, values, offset, size, stride)

    def _tensor(self, storage: _Storage, values: np.ndarray, offset, size, stride) -> np.ndarray:
        if (type(size) is not tuple or type(stride) is not tuple or len(size) != len(stride) or len(size) > 32
                or not all(type(n) is int for n in (offset, *size, *stride))
                or offset < 0 or any(n < 0 for n in size) or any(s < 0 for s in stride)):
            self.fail(f"a tensor on storage {storage.key} has a bad layout (size {shown(size)}, stride "
                      f"{shown(stride)}, offset {shown(offset)})")
        numel = int(np.prod(size, dtype=object)) if size else 1
        nbytes = numel * values.itemsize
        if numel and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= values.size:
            self.fail(f"a tensor in the checkpoint (size {shown(size)}, stride {shown(stride)}, offset "
                      f"{shown(offset)}) reaches past its storage {storage.key} of {values.size} elements")
        if nbytes > EXPAND_FACTOR * values.nbytes + EXPAND_SLACK:
            self.fail(f"a tensor of size {shown(size)} with strides {shown(stride)} on storage {storage.key} "
                      f"({values.size} elements) would copy to {shown(nbytes)} bytes, more than {EXPAND_FACTOR} times "
                      "its storage: an expanded (stride-0) view is not read")
        if nbytes > self.budget:
            self.fail(f"the tensors of the checkpoint copy to more than {TOTAL_FACTOR} times its {self.size} bytes")
        self.budget -= nbytes
        if not numel:
            return np.zeros(size, dtype=values.dtype)
        view = np.lib.stride_tricks.as_strided(values[offset:], shape=size,
                                               strides=tuple(s * values.itemsize for s in stride), writeable=False)
        return np.array(view)

    def rebuild_parameter(self, data, requires_grad=False, hooks=None, state=None):
        if not isinstance(data, np.ndarray) or state not in (None, {}):
            self.fail("a parameter in the checkpoint holds something other than a tensor")
        return data


def _admitted(read: _Read, namespace: bool) -> dict:
    """``(module, name)`` -> the stand-in or value each admitted global means, made for this read."""

    def to_set(kind):
        def make(items=()):
            if type(items) not in (list, tuple, set) or not all(flat_key(i, _KEY_TYPES) for i in items):
                read.fail(f"{kind.__name__}() of {type(items).__name__} in the checkpoint (a list of scalars)")
            return kind(items)
        return make

    def latin1(text, encoding):  # _codecs.encode: how protocol 2 writes bytes
        if type(text) is not str or encoding not in ("latin1", "latin-1"):
            read.fail("the checkpoint encodes bytes other than as latin-1 text")
        return text.encode("latin-1")

    def bytes_(*args):
        if args == ():
            return b""
        if len(args) == 1 and type(args[0]) is bytes:
            return args[0]
        return latin1(*args)

    def ordered(*args):
        if args:
            read.fail("an OrderedDict in the checkpoint is built from arguments")
        return collections.OrderedDict()

    def device(kind, index=None):
        if type(kind) is not str or not (index is None or type(index) is int):
            read.fail("a torch.device in the checkpoint is not (type, index)")
        kind, _, text = kind.partition(":")
        if text and index is None and text.isdigit():
            index = int(text)
        return Device(kind, index)

    def size(dims=()):
        if type(dims) is not tuple:
            read.fail("a torch.Size in the checkpoint is not built from a tuple")
        return dims

    def make_complex(real=0.0, imag=0.0):
        if not all(type(x) in (int, float) for x in (real, imag)):
            read.fail("a complex number in the checkpoint is built from something other than two numbers")
        return complex(real, imag)

    def as_bytearray(*args):
        return bytearray(bytes_(*args))

    table = {("collections", "OrderedDict"): StandIn("collections.OrderedDict", ordered, new=ordered, buildable=True),
             ("torch._utils", "_rebuild_tensor_v2"): StandIn("torch._utils._rebuild_tensor_v2", read.rebuild_tensor),
             ("torch._utils", "_rebuild_tensor_v3"): StandIn("torch._utils._rebuild_tensor_v3", read.rebuild_tensor_v3),
             ("torch._utils", "_rebuild_parameter"): StandIn("torch._utils._rebuild_parameter", read.rebuild_parameter),
             ("torch._utils", "_rebuild_parameter_with_state"):
                 StandIn("torch._utils._rebuild_parameter_with_state", read.rebuild_parameter),
             ("torch", "Size"): StandIn("torch.Size", size),
             ("torch", "device"): StandIn("torch.device", device),
             ("_codecs", "encode"): StandIn("_codecs.encode", latin1)}
    for module in ("builtins", "__builtin__"):
        table[(module, "set")] = StandIn("set", to_set(set))  # OpenNMT-py 3.5's options hold sets
        table[(module, "bytes")] = StandIn("bytes", bytes_)  # b"" at protocol 2 (torch.load refuses it)
        table[(module, "complex")] = StandIn("complex", make_complex)
        table[(module, "bytearray")] = StandIn("bytearray", as_bytearray)
    for name in _STORAGE_DTYPES:
        table[("torch", name)] = StandIn(f"torch.{name}")  # only a storage reference's element type
    table[("torch.storage", "UntypedStorage")] = StandIn("torch.storage.UntypedStorage")
    read.kinds = {f"torch.{name}": kind for name, kind in _STORAGE_DTYPES.items()}
    read.kinds["torch.storage.UntypedStorage"] = None  # bytes, typed by _rebuild_tensor_v3's dtype
    for name in _DTYPE_NAMES:
        table[("torch", name)] = DType(name)
    if namespace:
        def make_namespace(*args):
            if args:
                read.fail("an argparse.Namespace in the checkpoint is built from arguments")
            return argparse.Namespace()
        table[("argparse", "Namespace")] = StandIn("argparse.Namespace", make_namespace, new=make_namespace,
                                                   buildable=True)
    return table


def _check_plain(read: _Read, obj) -> None:
    """Refuse a stand-in left as a value, a cycle, or nesting deeper than MAX_DEPTH (iteratively)."""
    leaves = (str, bytes, bytearray, int, float, complex, bool, type(None), np.ndarray, DType, Device)
    depth_of, active = {}, set()
    todo = [(obj, False)]
    while todo:
        item, done = todo.pop()
        if isinstance(item, leaves):
            continue
        key = id(item)
        if done:
            active.discard(key)
            depth_of[key] = 1 + max((depth_of.get(id(c), 0) for c in _children(item)), default=0)
            if depth_of[key] > MAX_DEPTH:
                read.fail(f"the checkpoint nests containers deeper than {MAX_DEPTH}")
            continue
        if key in depth_of:
            continue
        if key in active:
            read.fail("the checkpoint holds a container that contains itself")
        if isinstance(item, StandIn):
            read.fail(f"the checkpoint holds {item.name} as a value")
        if not isinstance(item, (list, tuple, set, dict, argparse.Namespace)):
            read.fail(f"the checkpoint holds a {type(item).__name__}")
        active.add(key)
        todo.append((item, True))
        todo.extend((c, False) for c in _children(item) if not isinstance(c, leaves))


def _children(item):
    if isinstance(item, dict):  # an OrderedDict's attributes (its state dict's _metadata) too
        return [*item.keys(), *item.values(), *getattr(item, "__dict__", {}).values()]
    if isinstance(item, argparse.Namespace):
        return list(vars(item).values())
    return list(item)


def _open_archive(path: Path, file, size: int) -> tuple:
    """(archive, member prefix) once its members are what torch.save writes (module docstring)."""
    try:
        archive = zipfile.ZipFile(file)
    except zipfile.BadZipFile as exc:
        raise ModelFormatError(f"{path}: not a torch.save zip archive ({exc}; the legacy pre-1.6 format and other "
                               "files are not read; export the state dict to .safetensors)") from None
    infos = archive.infolist()
    names = [i.filename for i in infos]
    pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise ModelFormatError(f"{path}: no single '<name>/data.pkl' in the archive")
    prefix = pickles[0][: -len("data.pkl")]
    if len(set(names)) != len(names):
        raise ModelFormatError(f"{path}: the archive names a member twice")
    storage = re.compile(re.escape(prefix) + r"data/[0-9A-Za-z_.]+\Z")
    declared = 0
    for info in infos:
        name = info.filename
        known = name[len(prefix):] in ("data.pkl", *_META_MEMBERS) or storage.match(name)
        if not (name.startswith(prefix) and known):
            raise ModelFormatError(f"{path}: the archive holds {name[:100]!r}, which torch.save does not write")
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ModelFormatError(f"{path}: member {name} is encrypted or compressed with method "
                                   f"{info.compress_type} (torch.save stores members uncompressed)")
        if info.file_size > size:
            raise ModelFormatError(f"{path}: member {name} claims {info.file_size} bytes uncompressed, more than the "
                                   f"whole {size}-byte file (a zip bomb, or a corrupted size)")
        if info.header_offset + info.compress_size > size:
            raise ModelFormatError(f"{path}: member {name} ({info.compress_size} bytes at offset "
                                   f"{info.header_offset}) reaches past the end of the {size}-byte file")
        declared += info.file_size
    if declared > size:
        raise ModelFormatError(f"{path}: the archive's members claim {declared} bytes in all, more than the file's "
                               f"{size} (a zip bomb, or members overlapping one another)")
    return archive, prefix


def read_checkpoint(path, *, namespace: bool = False):
    """The object ``torch.save`` wrote to ``path``, its tensors as NumPy arrays (module docstring).
    ``namespace``: admit ``argparse.Namespace`` (OpenNMT-py's options) as plain data."""
    path = Path(path)
    with os.fdopen(open_regular(path), "rb") as file:
        size = os.fstat(file.fileno()).st_size
        try:
            archive, prefix = _open_archive(path, file, size)
            with archive:
                order = f"{prefix}byteorder"
                if order in archive.NameToInfo and archive.read(order).strip() != b"little":
                    raise ModelFormatError(f"{path}: big-endian checkpoints are not read")
                read = _Read(path, archive, prefix, size, namespace)
                obj = restricted_pickle.load(archive.read(f"{prefix}data.pkl"), f"{path} ({prefix}data.pkl)",
                                             read.globals, read.persistent_load, key_types=(DType, Device))
                _check_plain(read, obj)
                unused = [n for n in archive.NameToInfo if n.startswith(f"{prefix}data/")
                          and n[len(prefix) + 5:] not in read.storages]
                if unused:
                    raise ModelFormatError(f"{path}: the archive holds storage(s) no tensor refers to: "
                                           f"{', '.join(unused[:5])}")
                return obj
        except ModelFormatError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, TypeError, KeyError,
                IndexError, OverflowError, RecursionError, NotImplementedError, RuntimeError, zlib.error) as exc:
            raise ModelFormatError(f"{path}: not a checkpoint seqjit can read ({type(exc).__name__}: "
                                   f"{str(exc)[:200]})") from None
