"""``model.safetensors``: reading it with every check done before the data is trusted, and writing it.

Reading (:func:`read_safetensors`) goes in this order, so a bad file costs little:

1. the header (8-byte length + JSON) is read and checked by seqjit first: entries well formed, every
   dtype one seqjit reads (``F8_E4M3``, ``C64``... are refused naming the tensor), every tensor's
   bytes (its shape's product, in Python integers, times its element size) equal to the span of its
   ``data_offsets``, the spans inside the file and tiling its data region without overlap or gap,
   so nothing a header declares is allocated beyond the file's own size; and, when the caller
   gives the architecture's weight spec, every name, shape and dtype against it: a config that
   contradicts the weights is refused before any tensor is read;
2. safetensors reads the tensors (it checks offsets and the file size: a truncated file is refused);
   ``BF16`` tensors, which its NumPy API cannot return, are read by seqjit from their checked span;
3. the per-tensor CRC-32 checksums in the metadata (key ``seqjit.crc32``, a JSON object name ->
   CRC) are verified; a malformed value, a missing or an extra entry is an error; a file with none
   gets a :class:`~seqjit.errors.ChecksumWarning` when the caller asks for it (``seqjit.load``);
4. every float tensor is checked for NaN and Inf (opt out with ``allow_nonfinite=True``), 16-bit
   ones on their bits.

16-bit float tensors (``F16``, ``BF16``: :mod:`seqjit.models.half_format`) are returned as their raw
``uint16`` bits when the caller reads a model of that format (``half_format``), else widened to
float32 (exactly, once). :func:`write_safetensors` always writes the checksums, through a temporary
file renamed into place, and writes ``uint16`` tensors as ``half_format``'s code (``F16``/``BF16``).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
import zlib
from pathlib import Path

import numpy as np

from typing import NamedTuple

from seqjit.errors import ChecksumWarning, ModelFormatError
from seqjit.models.files import open_regular, parse_json
from seqjit.models.half_format import CODES, FORMATS, check_format, count_nonfinite, widen

CRC_KEY = "seqjit.crc32"
#: safetensors' own limit on the header size
HEADER_MAX_BYTES = 100 << 20
#: the most dimensions a tensor may declare (NumPy's own limit is 64)
MAX_DIMS = 32
#: safetensors dtype code -> the NumPy dtype its elements are stored as (F16 and BF16: 16-bit words,
#: :mod:`seqjit.models.half_format`)
DTYPES = {"F64": "float64", "F32": "float32", "F16": "uint16", "BF16": "uint16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8",
          "BOOL": "bool"}
_CODE_OF = {"float64": "F64", "float32": "F32", "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8",
            "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8", "bool": "BOOL", "float16": "F16"}


class Entry(NamedTuple):
    """One tensor of a safetensors header: its shape, storage dtype, dtype code, and where its bytes
    start in the file."""

    shape: tuple
    dtype: np.dtype
    code: str
    start: int


def read_header(path: Path) -> tuple:
    """``({name: Entry}, metadata dict)`` from the header of safetensors file ``path``."""
    try:
        with os.fdopen(open_regular(path), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            prefix = f.read(8)
            if len(prefix) < 8:
                raise ModelFormatError(f"{path} is not a readable safetensors file ({size} bytes, too short); it is "
                                       "truncated")
            length = int.from_bytes(prefix, "little")
            if length > min(size - 8, HEADER_MAX_BYTES):
                raise ModelFormatError(f"{path} is not a readable safetensors file (its header claims {length} bytes, "
                                       f"the file holds {size - 8} after the length prefix, the limit is "
                                       f"{HEADER_MAX_BYTES}); it is truncated or corrupted")
            raw = f.read(length)
    except OSError as exc:
        raise ModelFormatError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if len(raw) < length:
        raise ModelFormatError(f"{path} is not a readable safetensors file (it ends inside its header); it is truncated")
    header = parse_json(raw, f"{path}'s safetensors header")
    if not isinstance(header, dict):
        raise ModelFormatError(f"{path}: the safetensors header must be a JSON object, got {type(header).__name__}")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ModelFormatError(f"{path}: the safetensors __metadata__ must map names to strings")
    entries, spans = {}, []
    for name, entry in header.items():
        shape, code, span = _entry(path, name, entry)
        entries[name] = Entry(shape, np.dtype(DTYPES[code]), code, 8 + length + span[0])
        spans.append((span, name))
    _check_spans(path, spans, size - 8 - length)
    return entries, metadata


def _check_spans(path: Path, spans: list, data_bytes: int) -> None:
    """The tensors' ``data_offsets`` tile the ``data_bytes`` after the header: in order, no overlap,
    no gap, nothing past the end (safetensors' own rule, checked here before it reads anything)."""
    at = 0
    for (begin, end), name in sorted(spans):
        if end > data_bytes:
            raise ModelFormatError(f"{path}: tensor {name!r} has data_offsets [{begin}, {end}], past the "
                                   f"{data_bytes} bytes of data the file holds; it is truncated or corrupted")
        if begin != at:
            what = "overlaps the tensor before it" if begin < at else f"leaves bytes {at} to {begin} unused"
            raise ModelFormatError(f"{path}: tensor {name!r} (data_offsets [{begin}, {end}]) {what}; the header "
                                   "is corrupted")
        at = end
    if at != data_bytes:
        raise ModelFormatError(f"{path}: the tensors' data ends at byte {at} of the {data_bytes} after the header; "
                               "the file holds bytes no tensor names (corrupted)")


def _entry(path: Path, name: str, entry) -> tuple:
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if not isinstance(entry, dict):
        raise ModelFormatError(f"{path}: the header entry of tensor {name!r} is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or not all(is_int(d) for d in shape):
        raise ModelFormatError(f"{path}: tensor {name!r} has no valid shape (a list of non-negative integers)")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(is_int(o) for o in offsets):
        raise ModelFormatError(f"{path}: tensor {name!r} has no valid data_offsets (two non-negative integers)")
    if dtype not in DTYPES:
        shown = dtype if isinstance(dtype, str) else repr(dtype)[:40]
        raise ModelFormatError(f"{path}: tensor {name!r} has dtype {shown}, which seqjit cannot read (supported: "
                               f"{', '.join(DTYPES)}); convert the weights to float32 first")
    if len(shape) > MAX_DIMS:
        raise ModelFormatError(f"{path}: tensor {name!r} has {len(shape)} dimensions, more than the {MAX_DIMS} "
                               "seqjit reads")
    begin, end = offsets
    nbytes = np.dtype(DTYPES[dtype]).itemsize
    for n in shape:  # Python integers: no overflow, however large the declared shape
        nbytes *= n
    if begin > end or end - begin != nbytes:
        shown = nbytes if nbytes < 1 << 64 else "over 2**64"  # str() of a huge int raises ValueError
        raise ModelFormatError(f"{path}: tensor {name!r} declares shape {str(shape)[:80]} of {dtype} "
                               f"({shown} bytes), but its data_offsets [{begin}, {end}] span "
                               f"{end - begin} bytes; the header is corrupted")
    return tuple(shape), dtype, (begin, end)


def expected_code(dtype, half_format: str | None = None) -> str:
    """The safetensors code a weight of NumPy ``dtype`` is stored as: ``uint16`` is ``half_format``'s
    code (F16, BF16) in a 16-bit model, else U16."""
    name = np.dtype(dtype).name
    if name == "uint16" and half_format is not None:
        return CODES[check_format(half_format)]
    return _CODE_OF[name]


def _shown(code: str) -> str:
    """A dtype code by its NumPy-style name (F32: float32; BF16: bfloat16; U16: uint16)."""
    return FORMATS.get(code) or next(name for name, c in _CODE_OF.items() if c == code)


def check_header(path: Path, entries: dict, spec: dict, half_format: str | None = None) -> None:
    """Every weight of ``spec`` (name -> TensorSpec) present in ``entries`` with its shape and dtype
    code (a ``uint16`` weight of a ``half_format`` model: that format's code), and nothing else; one
    ModelFormatError lists every problem."""
    from seqjit.models.weight_checks import name_problems

    problems = name_problems(spec, entries)
    for name, want in spec.items():
        if name not in entries:
            continue
        entry, code = entries[name], expected_code(want.dtype, half_format)
        if entry.shape != tuple(want.shape):
            problems.append(f"{name} has shape {list(entry.shape)}, expected {list(want.shape)}")
        elif entry.code != code:
            problems.append(f"{name} has dtype {_shown(entry.code)}, expected {_shown(code)}")
    if problems:
        raise ModelFormatError(f"{path}: " + "; ".join(problems))


def read_safetensors(path, *, verify: bool = True, spec: dict | None = None, warn_unchecked: bool = False,
                     allow_nonfinite: bool = False, half_format: str | None = None) -> tuple:
    """``(tensors, metadata)`` of safetensors file ``path`` as NumPy arrays, checked in the order of
    the module docstring (``spec``: check the header against it first; ``verify``: the checksums;
    ``warn_unchecked``: warn when there are none). 16-bit float tensors of format ``half_format``
    (``"float16"``, ``"bfloat16"``) come back as their ``uint16`` bits, every other one widened to
    float32. Every problem is a ModelFormatError naming the file."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if half_format is not None:
        check_format(half_format)
    entries, metadata = read_header(path)
    if spec is not None:
        check_header(path, entries, spec, half_format)
    try:
        tensors = {}
        with safe_open(str(path), framework="np") as f:
            for name in f.keys():
                if entries[name].code != "BF16":  # NumPy has no bfloat16: read below
                    tensors[name] = f.get_tensor(name)
    except (SafetensorError, OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ModelFormatError(f"{path} is not a readable safetensors file ({exc}); it is truncated or "
                               "corrupted") from None
    halves = {name: FORMATS[e.code] for name, e in entries.items() if e.code in FORMATS}
    _read_words(path, entries, [n for n, fmt in halves.items() if fmt == "bfloat16"], tensors)
    for name in halves:
        tensors[name] = tensors[name].view(np.uint16)
    if verify:
        verify_checksums(path, tensors, metadata, warn_missing=warn_unchecked)
    if not allow_nonfinite:
        check_finite(path, tensors, halves)
    for name, fmt in halves.items():
        if fmt != half_format:
            tensors[name] = widen(tensors[name], fmt)
    return tensors, metadata


def _read_words(path: Path, entries: dict, names: list, tensors: dict) -> None:
    """The 16-bit words of tensors ``names`` into ``tensors``, each read from its checked span."""
    if not names:
        return
    with os.fdopen(open_regular(path), "rb") as f:
        for name in names:
            entry = entries[name]
            words = np.empty(entry.shape, np.dtype("<u2"))
            f.seek(entry.start)
            if f.readinto(memoryview(words.reshape(-1)).cast("B")) != words.nbytes:
                raise ModelFormatError(f"{path}: tensor {name!r} ends past the end of the file; it is truncated")
            tensors[name] = words.astype(np.uint16, copy=False)


def verify_checksums(path: Path, tensors: dict, metadata: dict, *, warn_missing: bool = False) -> None:
    raw = metadata.get(CRC_KEY)
    if raw is None:
        if warn_missing:
            warnings.warn(f"{path} carries no per-tensor checksums ({CRC_KEY!r} metadata), so corrupted weights "
                          "cannot be detected; re-save the model with seqjit to add them", ChecksumWarning,
                          stacklevel=4)
        return
    what = f"{path}: the checksum metadata {CRC_KEY!r}"
    try:
        expected = json.loads(raw)
    except (ValueError, RecursionError):
        raise ModelFormatError(f"{what} is not valid JSON; the file is corrupted") from None
    if not isinstance(expected, dict):
        raise ModelFormatError(f"{what} must be a JSON object (tensor name -> CRC-32), got {type(expected).__name__}")
    missing = sorted(set(tensors) - set(expected))
    extra = sorted(set(expected) - set(tensors))
    if missing or extra:
        from seqjit.models.weight_checks import name_listing

        parts = ([f"has no entry for {name_listing(missing)}"] if missing else []) + (
            [f"names tensor(s) the file lacks: {name_listing(extra)}"] if extra else [])
        raise ModelFormatError(f"{what} {' and '.join(parts)}; the file is corrupted or was edited")
    for name, arr in tensors.items():
        want = expected[name]
        if not isinstance(want, int) or isinstance(want, bool) or not 0 <= want < 1 << 32:
            raise ModelFormatError(f"{what} holds {str(want)[:40]!r} for {name!r}, not a CRC-32 (0 <= n < 2**32)")
        if crc32(arr) != want:
            raise ModelFormatError(f"{path}: tensor {name!r} fails its CRC-32 check; the file is corrupted")


def check_finite(path: Path, tensors: dict, halves: dict | None = None) -> None:
    """Refuse a float tensor holding NaN or Inf (min and max propagate NaN: two passes, no copy);
    ``halves``: name -> format of the tensors that are 16-bit float words."""
    halves = halves or {}
    for name, arr in tensors.items():
        bad = 0
        if name in halves:
            bad = count_nonfinite(arr, halves[name])
        elif arr.dtype.kind == "f" and arr.size and not (np.isfinite(arr.min()) and np.isfinite(arr.max())):
            bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        if bad:
            raise ModelFormatError(f"{path}: tensor {name!r} holds {bad} non-finite value(s) (NaN or Inf), which "
                                   "would decode garbage; pass allow_nonfinite=True to load it anyway")


def write_safetensors(path, tensors: dict, metadata: dict | None = None, half_format: str | None = None) -> None:
    """Write ``tensors`` with their CRC-32 checksums in the metadata (always); ``uint16`` tensors as
    16-bit floats of ``half_format`` (``"float16"``: F16, ``"bfloat16"``: BF16) when given."""
    path = Path(path)
    if half_format is not None:
        check_format(half_format)
    tensors = {k: np.ascontiguousarray(v, dtype=v.dtype.newbyteorder("<")) for k, v in tensors.items()}
    meta = dict(metadata or {})
    meta[CRC_KEY] = json.dumps({k: crc32(v) for k, v in tensors.items()}, sort_keys=True)
    # a temporary name no one can guess (created exclusively, links not followed), renamed over path:
    # a link planted at path, or at a fixed temporary name, is replaced rather than written through
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        _serialize(tensors, tmp, meta, half_format)
        os.chmod(tmp, 0o644)  # safetensors creates the file owner-only; a model is data others may read
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def crc32(arr: np.ndarray) -> int:
    # flattened first: memoryview.cast refuses a shape with a zero in it, such as (2, 0, 3)
    return zlib.crc32(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))


def _serialize(tensors: dict, filename: str, metadata: dict, half_format: str | None) -> None:
    """safetensors' own writer, given each tensor's dtype by name (its NumPy API cannot name bfloat16)."""
    import safetensors

    keep = []
    flat = {}
    for name, arr in tensors.items():
        dtype = half_format if arr.dtype == np.uint16 and half_format is not None else arr.dtype.name
        spec_class = getattr(safetensors, "TensorSpec", None)  # safetensors >= 0.8 takes a pointer
        if spec_class is None:
            flat[name] = {"dtype": dtype, "shape": arr.shape, "data": arr.tobytes()}
        else:
            keep.append(arr)
            flat[name] = spec_class(dtype=dtype, shape=arr.shape, data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    safetensors.serialize_file(flat, filename, metadata=metadata)
