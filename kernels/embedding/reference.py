"""NumPy reference for embedding and sinusoidal_positions: the readable specification."""
from __future__ import annotations

import numpy as np

from . import spec


def embedding(ids, table, *, scale=1.0, positions=None, out=None):
    """``table[ids] * scale`` (+ ``positions[l]`` along the last ids axis): ids ``[...]`` ->
    ``[..., D]``; table ``[V, D]``; positions ``[L, D]`` with ``L = ids.shape[-1]`` or None."""
    ids1, table, scale, positions, o2, result = spec.prepare(ids, table, scale, positions, out)
    y = table[ids1].astype(np.float64) * scale
    if positions is not None:
        y = y.reshape(-1, positions.shape[0], table.shape[1]) + positions
    o2[...] = y.reshape(o2.shape)
    return result


def sinusoidal_positions(length, dim, *, layout="interleaved", offset=0, dtype=np.float32):
    """Sinusoidal position encodings ``[length, dim]`` for positions ``offset .. offset+length-1``.

    Column ``j`` has angle ``p / 10000 ** (2 * (j // 2) / dim)``; "interleaved": ``sin`` for even
    ``j``, ``cos`` for odd ``j``; "halves": the sines of the even-``j`` angles, then the cosines of the
    odd-``j`` angles (``MarianSinusoidalPositionalEmbedding``). Computed in float64.
    """
    length, dim, offset, halves, dtype = spec.check_positions_args(length, dim, layout, offset, dtype)
    p = np.arange(offset, offset + length, dtype=np.float64)[:, None]
    j = np.arange(dim)
    angle = p / np.power(10000, 2 * (j // 2) / dim)
    if halves:
        table = np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1)
    else:
        table = np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
    return table.astype(dtype)
