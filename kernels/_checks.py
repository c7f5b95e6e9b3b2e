"""Argument checks shared by every kernel family's ``spec.py``.

Each helper raises ``TypeError`` (wrong type or dtype) or ``ValueError`` (wrong rank, shape or value)
with a message that names the argument and says what was expected. Kernels call these before
entering jitted code, which does no bounds checks.
"""
from __future__ import annotations

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
INT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def is_device_array(x) -> bool:
    """A numba.cuda device array (real or simulated): not numpy, but has a shape and copies to host."""
    return not isinstance(x, np.ndarray) and hasattr(x, "copy_to_host") and hasattr(x, "shape")


def float_array(name: str, x, *, ndim: int | tuple[int, ...] | None = None, dtypes=FLOAT_DTYPES):
    """``x`` as a C-contiguous float array (float32 or float64; no silent dtype change).

    A numba.cuda device array passes through unchanged (the cuda backend's inputs), after the same
    dtype and rank checks.
    """
    if not isinstance(x, np.ndarray) and not is_device_array(x):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if np.dtype(x.dtype) not in dtypes:
        allowed = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{name} must have dtype {allowed}, got {x.dtype}")
    check_ndim(name, x, ndim)
    if is_device_array(x) or x.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        return x
    return np.ascontiguousarray(x)


def int_array(name: str, x, *, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """``x`` as a C-contiguous int64 array (accepts any integer dtype; refuses floats and bools)."""
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {x.dtype}")
    check_ndim(name, x, ndim)
    if x.dtype == np.int64 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.int64).reshape(x.shape)


def check_ndim(name: str, x, ndim) -> None:
    if ndim is None:
        return
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if len(x.shape) not in allowed:
        want = " or ".join(str(n) for n in allowed)
        raise ValueError(f"{name} must have {want} dimensions, got shape {x.shape}")


def check_shape(name: str, x: np.ndarray, expected: tuple, *, what: str = "") -> None:
    """``expected`` may hold ``None`` for a free dimension."""
    ok = len(x.shape) == len(expected) and all(e is None or e == s for e, s in zip(expected, x.shape))
    if not ok:
        want = "[" + ", ".join("*" if e is None else str(e) for e in expected) + "]"
        extra = f" ({what})" if what else ""
        raise ValueError(f"{name} must have shape {want}{extra}, got {list(x.shape)}")


def same_dtype(dtype: np.dtype, **arrays) -> None:
    for name, a in arrays.items():
        if a is not None and a.dtype != dtype:
            raise TypeError(f"{name} must have dtype {dtype} like the input, got {a.dtype}")


def lengths_array(name: str, lengths, batch: int, max_length: int) -> np.ndarray:
    """Per-row valid lengths: int64 ``[batch]``, each in ``[0, max_length]``."""
    lengths = int_array(name, lengths, ndim=1)
    if lengths.shape[0] != batch:
        raise ValueError(f"{name} must have shape [{batch}] (one length per batch row), got {list(lengths.shape)}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > max_length):
        raise ValueError(f"{name} must lie in [0, {max_length}], got values from {lengths.min()} to {lengths.max()}")
    return lengths


def out_array(name: str, out, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A caller-provided output buffer, or a fresh one when ``out`` is None."""
    if out is None:
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape) or out.dtype != dtype or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError(
            f"{name} must be a writeable C-contiguous {np.dtype(dtype)} array of shape {list(shape)}, "
            f"got {out.dtype} {list(out.shape)}"
        )
    return out


def positive_float(name: str, value) -> float:
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return value
