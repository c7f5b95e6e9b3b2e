"""Reading the files of a model directory without trusting the directory.

A model directory may come from anywhere, so every file seqjit reads from one goes through here:

- :func:`model_file`: ``directory / name`` only when ``name`` is a plain relative name (no absolute
  path, no ``..``) whose resolved path, symlinks followed, stays inside the directory. The one
  exception is the Hugging Face hub cache, whose ``snapshots/<rev>/`` files are links into the
  repository's ``blobs/`` folder: those targets are accepted too.
- :func:`read_limited`: the bytes of a *regular* file of at most ``max_bytes``; a FIFO, a device
  (a link to ``/dev/zero``), a socket or a directory is refused before anything is read, and the
  read itself stops at the limit.
- :func:`read_json`: a JSON object from such a file; every failure (bad UTF-8, bad JSON, nesting
  deep enough to raise ``RecursionError``, an integer of too many digits) is a ModelFormatError
  naming the file.
- :func:`write_replacing`: what seqjit writes into a directory goes through a temporary file of an
  unpredictable name renamed into place, so a link planted at the name is replaced, not followed.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from seqjit.errors import ModelFormatError

#: the largest ``config.json`` (or tokenizer JSON) seqjit reads; real ones are a few KiB
CONFIG_MAX_BYTES = 1 << 20
#: the largest ``model.safetensors.index.json``; the index of a 400B-parameter model is under 1 MiB
INDEX_MAX_BYTES = 16 << 20


def _allowed_roots(root: Path) -> list:
    roots = [root]
    if root.parent.name == "snapshots":  # huggingface_hub cache: snapshots/<rev>/x -> ../../blobs/<sha>
        roots.append(root.parent.parent / "blobs")
    return roots


def model_file(directory, name) -> Path:
    """``directory / name``, refused (ModelFormatError) when ``name`` is not a plain relative file name
    or its resolved path leaves ``directory``. The file need not exist."""
    directory = Path(directory)
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ModelFormatError(f"{directory}: {name!r} is not a file name")
    if os.path.isabs(name) or ".." in Path(name).parts:
        raise ModelFormatError(f"{directory}: {name!r} names a file outside the model directory (an absolute "
                               "path or '..'); seqjit reads only files inside it")
    path = directory / name
    root = directory.resolve()
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ModelFormatError(f"{path} cannot be resolved: {exc}") from None
    if not any(resolved.is_relative_to(r) for r in _allowed_roots(root)):
        raise ModelFormatError(f"{path} resolves to {resolved}, outside the model directory {root}; seqjit reads "
                               "only files inside it (copy the file in instead of linking to it)")
    return path


def open_regular(path: Path) -> int:
    """A read-only descriptor of ``path``, which must be a regular file (checked on the open file, so
    a FIFO never blocks the open and cannot be swapped in between check and read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ModelFormatError(f"{path} does not exist") from None
    except OSError as exc:
        raise ModelFormatError(f"{path} cannot be read: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else
                "not a plain file")
        raise ModelFormatError(f"{path} is {kind}; seqjit reads model files only from regular files")
    return fd


def read_limited(path: Path, max_bytes: int) -> bytes:
    """The bytes of regular file ``path``; refused when it holds more than ``max_bytes``."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise ModelFormatError(f"{path} is {size} bytes, more than the {max_bytes} bytes seqjit reads from "
                                   f"such a file")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise ModelFormatError(f"{path} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise ModelFormatError(f"{path} holds more than the {max_bytes} bytes seqjit reads from such a file")
    return b"".join(chunks)


def parse_json(raw: bytes, where) -> object:
    """JSON from ``raw`` bytes; every failure is a ModelFormatError naming ``where``."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"{where} is not UTF-8 text ({exc})") from None
    except RecursionError:
        raise ModelFormatError(f"{where} nests JSON arrays or objects too deeply to be read") from None
    except ValueError as exc:  # JSONDecodeError, and an integer of more digits than Python converts
        raise ModelFormatError(f"{where} is not valid JSON ({exc}); the file is truncated or corrupted") from None


def read_json(path, *, max_bytes: int = CONFIG_MAX_BYTES) -> dict:
    """The JSON object in regular file ``path`` (at most ``max_bytes``); errors name the file."""
    path = Path(path)
    data = parse_json(read_limited(path, max_bytes), path)
    if not isinstance(data, dict):
        raise ModelFormatError(f"{path} must hold a JSON object, got {type(data).__name__}")
    return data


def write_replacing(path, data) -> None:
    """Write ``data`` (bytes, or str as UTF-8) to ``path`` through a new file of an unpredictable name
    in the same directory (``tempfile.mkstemp``: created exclusively, links not followed), renamed over
    ``path``: whatever stood at ``path`` (a symbolic link planted in an output directory, a hard link)
    is replaced, never written through."""
    import tempfile

    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(temporary, 0o644)  # mkstemp creates it owner-only; a model is data others may read
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
