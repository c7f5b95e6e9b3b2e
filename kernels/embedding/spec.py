"""embedding (table lookup, fused scale and positional add) and sinusoidal position tables:
argument checks and output allocation.

``embedding(ids, table, scale, positions)``: ``ids`` integers ``[...]``, each in ``[0, V)``;
``table`` ``[V, D]``; result ``[..., D] = table[ids] * scale (+ positions[l])`` where ``l`` is the
index along the last axis of ``ids`` and ``positions`` is ``[L, D]``, ``L = ids.shape[-1]``.

``sinusoidal_positions(length, dim, layout, offset)``: ``[length, dim]`` for positions
``offset .. offset + length - 1``, with angle ``p / 10000 ** (2 * (j // 2) / dim)`` for column pair
``j // 2``; "interleaved" puts sin in even and cos in odd columns (Vaswani et al.); "halves" puts the
``ceil(dim / 2)`` sines first and the ``floor(dim / 2)`` cosines after (Marian / Hugging Face).
"""
from __future__ import annotations

import numbers

import numpy as np

from seqjit.kernels import _checks

LAYOUTS = ("interleaved", "halves")


def check_ids(ids, vocab: int) -> np.ndarray:
    """``ids`` as a C-contiguous int64 array with every value in ``[0, vocab)``."""
    shape = np.shape(ids)  # int_array turns a 0-d array into shape (1,)
    ids = _checks.int_array("ids", ids).reshape(shape)
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= vocab:
            bad = lo if lo < 0 else hi
            raise ValueError(f"ids must lie in [0, {vocab}) (V = table.shape[0]), got {bad}")
    return ids


def prepare(ids, table, scale, positions, out, *, device: bool = False, host_ids=None):
    """Check the arguments; return ``(ids1d, table, scale, positions, out2d, result)``.

    ``ids1d`` is ``ids`` flattened to ``[n]`` (int64); ``out2d`` a ``[n, D]`` view of ``result``
    (``out`` itself when given). With ``device=True`` (cuda backend) no host output is made:
    ``out2d`` is None and ``result`` is the shape; ``host_ids`` then holds the host copy of a device
    ``ids`` for the range check (``ids1d`` is then ``ids`` itself, flattened).
    """
    table = _checks.float_array("table", table, ndim=2)
    vocab, dim = table.shape
    checked = check_ids(ids if host_ids is None else host_ids, vocab)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not np.isfinite(scale):
        raise ValueError(f"scale must be a finite real number, got {scale!r}")
    shape = tuple(checked.shape) + (dim,)
    if positions is not None:
        if checked.ndim == 0:
            raise ValueError("positions needs ids with at least 1 dimension (positions run along the last axis)")
        positions = _checks.float_array("positions", positions, ndim=2)
        _checks.check_shape("positions", positions, (checked.shape[-1], dim), what="[L, D], L = ids.shape[-1], D = table.shape[1]")
        _checks.same_dtype(np.dtype(table.dtype), positions=positions)
    ids1d = checked.reshape(-1) if host_ids is None else ids.reshape(checked.size)
    if device:
        return ids1d, table, float(scale), positions, None, shape
    result = _checks.out_array("out", out, shape, table.dtype)
    return ids1d, table, float(scale), positions, result.reshape(checked.size, dim), result


def check_positions_args(length, dim, layout, offset, dtype):
    """Check sinusoidal_positions' arguments; return ``(length, dim, offset, halves, dtype)``."""
    for name, value, low in (("length", length, 0), ("dim", dim, 1), ("offset", offset, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be 'interleaved' or 'halves', got {layout!r}")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dtype not in _checks.FLOAT_DTYPES:
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    return int(length), int(dim), int(offset), layout == "halves", dtype
