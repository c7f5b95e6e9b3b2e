"""``model.safetensors``: reading it with every check done before the data is trusted, and writing it.

Reading (:func:`read_safetensors`) goes in this order, so a bad file costs little:

1. the header (8-byte length + JSON) is read and checked by seqjit first: entries well formed, every
   dtype one NumPy has (``F8_E4M3``, ``BF16``... are refused naming the tensor), every tensor's
   bytes (its shape's product, in Python integers, times its element size) equal to the span of its
   ``data_offsets``, the spans inside the file and tiling its data region without overlap or gap,
   so nothing a header declares is allocated beyond the file's own size; and, when the caller
   gives the architecture's weight spec, every name, shape and dtype against it: a config that
   contradicts the weights is refused before any tensor is read;
2. safetensors reads the tensors (it checks offsets and the file size: a truncated file is refused);
3. the per-tensor CRC-32 checksums in the metadata (key ``seqjit.crc32``, a JSON object name ->
   CRC) are verified; a malformed value, a missing or an extra entry is an error; a file with none
   gets a :class:`~seqjit.errors.ChecksumWarning` when the caller asks for it (``seqjit.load``);
4. every float tensor is checked for NaN and Inf (opt out with ``allow_nonfinite=True``).

:func:`write_safetensors` always writes the checksums, through a temporary file renamed into place.
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

from seqjit.errors import ChecksumWarning, ModelFormatError
from seqjit.models.files import open_regular, parse_json

CRC_KEY = "seqjit.crc32"
#: safetensors' own limit on the header size
HEADER_MAX_BYTES = 100 << 20
#: the most dimensions a tensor may declare (NumPy's own limit is 64)
MAX_DIMS = 32
#: safetensors dtype code -> the NumPy dtype it is read as
DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "I32": "int32", "I16": "int16",
          "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}


def read_header(path: Path) -> tuple:
    """``({name: (shape tuple, numpy dtype)}, metadata dict)`` from the header of safetensors file ``path``."""
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
        entries[name], span = _entry(path, name, entry)
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
    return (tuple(shape), np.dtype(DTYPES[dtype])), (begin, end)


def check_header(path: Path, entries: dict, spec: dict) -> None:
    """Every weight of ``spec`` (name -> TensorSpec) present in ``entries`` with its shape and dtype,
    and nothing else; one ModelFormatError lists every problem."""
    from seqjit.models.weight_checks import name_problems

    problems = name_problems(spec, entries)
    for name, want in spec.items():
        if name not in entries:
            continue
        shape, dtype = entries[name]
        if shape != tuple(want.shape):
            problems.append(f"{name} has shape {list(shape)}, expected {list(want.shape)}")
        elif dtype != np.dtype(want.dtype):
            problems.append(f"{name} has dtype {dtype.name}, expected {np.dtype(want.dtype).name}")
    if problems:
        raise ModelFormatError(f"{path}: " + "; ".join(problems))


def read_safetensors(path, *, verify: bool = True, spec: dict | None = None, warn_unchecked: bool = False,
                     allow_nonfinite: bool = False) -> tuple:
    """``(tensors, metadata)`` of safetensors file ``path`` as NumPy arrays, checked in the order of
    the module docstring (``spec``: check the header against it first; ``verify``: the checksums;
    ``warn_unchecked``: warn when there are none). Every problem is a ModelFormatError naming the file."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    entries, metadata = read_header(path)
    if spec is not None:
        check_header(path, entries, spec)
    try:
        tensors = {}
        with safe_open(str(path), framework="np") as f:
            for name in f.keys():
                tensors[name] = f.get_tensor(name)
    except (SafetensorError, OSError, ValueError, TypeError, AttributeError) as exc:
        raise ModelFormatError(f"{path} is not a readable safetensors file ({exc}); it is truncated or "
                               "corrupted") from None
    if verify:
        verify_checksums(path, tensors, metadata, warn_missing=warn_unchecked)
    if not allow_nonfinite:
        check_finite(path, tensors)
    return tensors, metadata


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


def check_finite(path: Path, tensors: dict) -> None:
    """Refuse a float tensor holding NaN or Inf (min and max propagate NaN: two passes, no copy)."""
    for name, arr in tensors.items():
        if arr.dtype.kind == "f" and arr.size and not (np.isfinite(arr.min()) and np.isfinite(arr.max())):
            bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
            raise ModelFormatError(f"{path}: tensor {name!r} holds {bad} non-finite value(s) (NaN or Inf), which "
                                   "would decode garbage; pass allow_nonfinite=True to load it anyway")


def write_safetensors(path, tensors: dict, metadata: dict | None = None) -> None:
    """Write ``tensors`` with their CRC-32 checksums in the metadata (always)."""
    from safetensors.numpy import save_file

    path = Path(path)
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    meta = dict(metadata or {})
    meta[CRC_KEY] = json.dumps({k: crc32(v) for k, v in tensors.items()}, sort_keys=True)
    # a temporary name no one can guess (created exclusively, links not followed), renamed over path:
    # a link planted at path, or at a fixed temporary name, is replaced rather than written through
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=meta)
        os.chmod(tmp, 0o644)  # safetensors creates the file owner-only; a model is data others may read
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def crc32(arr: np.ndarray) -> int:
    # flattened first: memoryview.cast refuses a shape with a zero in it, such as (2, 0, 3)
    return zlib.crc32(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
