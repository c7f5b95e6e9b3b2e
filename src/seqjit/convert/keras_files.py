"""Reading a Keras 3 ``.keras`` archive or legacy ``.h5`` file for :mod:`seqjit.convert.keras_rnn`:
its JSON config and its weight arrays, as strictly as seqjit's other readers read their files.

- The path must be a regular file (a FIFO or a device is refused before anything opens it:
  :func:`seqjit.models.files.open_regular`); h5py and zipfile read the descriptor opened then.
- ``.keras``: ``config.json`` and ``model.weights.h5`` members of bounded size, and of a size their
  compressed size can give (deflate expands at most ~1032 times), read into memory.
- HDF5: before any array is read, every object of the file is visited through its links (each
  object once, so hard-link cycles end): a soft or external link, a dataset stored in external
  files (``external=``: bytes of any local file) or virtual (data from other files), a filter other
  than deflate/shuffle/fletcher32, or a dataset whose declared bytes exceed what the file can hold
  (an unwritten 100,000 x 100,000 dataset reads as fill values: a few bytes on disk, 40 GB in
  memory) is a ModelFormatError naming the object. Arrays must be floating point.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from seqjit.errors import ModelFormatError

#: the largest config.json read from a .keras archive (or model_config attribute), and the largest weights file
CONFIG_MAX_BYTES = 64 << 20
WEIGHTS_MAX_BYTES = 8 << 30
#: deflate's largest expansion is about 1032:1; a member claiming more is not what it says
DEFLATE_MAX_RATIO = 1100
#: HDF5 filters a dataset may use (deflate, shuffle, fletcher32): any other needs a plugin
ALLOWED_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32"}
#: the most objects (groups, datasets) visited in a file: a Keras model of a few layers has dozens
MAX_OBJECTS = 100_000


def read_keras(path) -> tuple:
    """(config dict of the functional model, layer name -> its weight arrays in Keras' order); a file
    that is not a readable Keras model is a ModelFormatError naming it."""
    try:
        import h5py
    except ImportError:
        raise ImportError("reading a Keras model needs h5py: pip install 'seqjit[keras]'") from None
    from seqjit.models.files import open_regular

    path = Path(path)
    if not os.path.lexists(path):
        raise ModelFormatError(f"{path}: no such file (expected a .keras or .h5 Keras model)")
    if path.suffix not in (".keras", ".h5", ".hdf5"):
        raise ModelFormatError(f"{path}: expected a .keras or .h5 file, got suffix {path.suffix!r}")
    with os.fdopen(open_regular(path), "rb") as stream:
        try:
            return _read(path, stream, h5py)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, UnicodeDecodeError, RecursionError, KeyError,
                TypeError, AttributeError, IndexError, EOFError, NotImplementedError, OverflowError,
                RuntimeError) as exc:  # h5py: RuntimeError for a corrupted B-tree or symbol table
            raise ModelFormatError(f"{path}: not a readable Keras model ({type(exc).__name__}: {str(exc)[:200]})") \
                from None
        except ValueError as exc:
            if isinstance(exc, ModelFormatError):
                raise
            raise ModelFormatError(f"{path}: not a readable Keras model ({type(exc).__name__}: {str(exc)[:200]})") \
                from None


def _read(path: Path, stream, h5py) -> tuple:
    if path.suffix == ".keras":
        with zipfile.ZipFile(stream) as archive:
            config = _json(_member(archive, "config.json", CONFIG_MAX_BYTES, path), path)
            raw = _member(archive, "model.weights.h5", WEIGHTS_MAX_BYTES, path)
        with h5py.File(io.BytesIO(raw), "r") as f:
            check_hdf5(f, len(raw), path, h5py)
            return config, _keras_v3_weights(f, path)
    size = os.fstat(stream.fileno()).st_size
    with h5py.File(stream, "r") as f:
        check_hdf5(f, size, path, h5py)
        text = f.attrs.get("model_config")
        if text is None:
            raise ModelFormatError(f"{path}: no model_config attribute (a weights-only file? save the whole model)")
        if not isinstance(text, (str, bytes)) or len(text) > CONFIG_MAX_BYTES:
            raise ModelFormatError(f"{path}: the model_config attribute is not a JSON text of at most "
                                   f"{CONFIG_MAX_BYTES} bytes")
        return _json(text.encode() if isinstance(text, str) else text, path), _legacy_weights(f, path)


def _json(raw: bytes, path) -> dict:
    config = json.loads(raw.decode("utf-8"))
    if not isinstance(config, dict):
        raise ModelFormatError(f"{path}: the model config is a JSON {type(config).__name__}, not an object")
    return config


def _member(archive, name: str, limit: int, path) -> bytes:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise ModelFormatError(f"{path}: the archive has no {name} (not a Keras 3 .keras file)") from None
    if info.file_size > limit:
        raise ModelFormatError(f"{path}: {name} is {info.file_size} bytes, more than seqjit reads ({limit})")
    if info.file_size > DEFLATE_MAX_RATIO * max(info.compress_size, 1):
        raise ModelFormatError(f"{path}: {name} claims {info.file_size} bytes from {info.compress_size} compressed: "
                               "more than compression can give (a zip bomb or a corrupted archive)")
    return archive.read(info)


def check_hdf5(f, file_size: int, path, h5py) -> None:
    """Visit every object of open HDF5 file ``f`` (``file_size`` bytes) through its links, each once,
    and refuse what the module docstring lists, naming the object."""
    seen, pending = set(), [f]
    while pending:
        group = pending.pop()
        for name in group:
            link = group.get(name, getlink=True)
            where = f"{path}: HDF5 object {group.name.rstrip('/')}/{name}"
            if isinstance(link, (h5py.SoftLink, h5py.ExternalLink)):
                kind = "a soft link" if isinstance(link, h5py.SoftLink) else "an external link (to another file)"
                raise ModelFormatError(f"{where} is {kind}; a Keras model's weights file holds only groups and "
                                       "datasets")
            obj = group[name]
            if obj.id in seen:
                continue  # a second hard link to an object already checked (or a cycle)
            seen.add(obj.id)
            if len(seen) > MAX_OBJECTS:
                raise ModelFormatError(f"{path}: more than {MAX_OBJECTS} HDF5 objects; not a Keras model's weights")
            if isinstance(obj, h5py.Group):
                pending.append(obj)
            elif isinstance(obj, h5py.Dataset):
                _check_dataset(obj, file_size, where)
            else:
                raise ModelFormatError(f"{where} is a {type(obj).__name__}, not a group or dataset")


def _check_dataset(ds, file_size: int, where: str) -> None:
    if ds.external:
        raise ModelFormatError(f"{where} stores its data in external files {[e[0] for e in ds.external][:3]}; "
                               "seqjit reads weights only from the model's own file")
    if ds.is_virtual:
        raise ModelFormatError(f"{where} is a virtual dataset (data mapped from other files); seqjit reads weights "
                               "only from the model's own file")
    plist = ds.id.get_create_plist()
    compressed = False
    for i in range(plist.get_nfilters()):
        code = plist.get_filter(i)[0]
        if code not in ALLOWED_FILTERS:
            raise ModelFormatError(f"{where} uses HDF5 filter {code}; seqjit reads "
                                   f"{', '.join(ALLOWED_FILTERS.values())} only")
        compressed |= code == 1
    nbytes = int(np.prod(ds.shape, dtype=object)) * ds.dtype.itemsize if ds.shape is not None else 0
    limit = min(file_size * (DEFLATE_MAX_RATIO if compressed else 1), WEIGHTS_MAX_BYTES)
    if nbytes > limit:
        raise ModelFormatError(f"{where} declares shape {list(ds.shape)} ({nbytes} bytes), more than the "
                               f"{file_size}-byte file can hold")


def _array(ds, where: str) -> np.ndarray:
    if ds.dtype.kind != "f":
        raise ModelFormatError(f"{where}: weight {ds.name} has dtype {ds.dtype}, expected floats")
    return np.asarray(ds[()])


def _keras_v3_weights(f, path) -> dict:
    """``.keras``: ``layers/<path>/vars/<i>`` (an RNN's under ``cell/vars``, a wrapped layer's under
    ``layer/vars``), named by ``vars``' attribute."""
    out = {}
    for group in f.get("layers", {}).values():
        if "vars" not in group:
            continue
        name = group["vars"].attrs.get("name")
        arrays = []
        for sub in ("vars", "cell/vars", "layer/vars", "forward_layer/cell/vars", "backward_layer/cell/vars"):
            if sub in group:
                arrays += [_array(group[sub][str(i)], str(path)) for i in range(len(group[sub]))]
        out[name.decode() if isinstance(name, bytes) else name] = arrays
    return out


def _legacy_weights(f, path) -> dict:
    """``.h5``: ``model_weights/<layer>`` lists its weights in attribute ``weight_names``."""
    out = {}
    root = f.get("model_weights", f)
    for name, group in root.items():
        names = group.attrs.get("weight_names", [])
        out[name] = [_array(group[n.decode() if isinstance(n, bytes) else n], str(path)) for n in names]
    return out


__all__ = ["CONFIG_MAX_BYTES", "WEIGHTS_MAX_BYTES", "check_hdf5", "read_keras"]
