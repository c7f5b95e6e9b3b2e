"""Numba CPU embedding (gather, scale and positional add in one pass over the output) and
sinusoidal position tables; rows in parallel when large."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import spec

#: outputs smaller than this many elements are written by one thread
_PARALLEL_MIN = 1 << 15


@njit(inline="always")
def _gather_row(ids, table, scale, positions, out, i):
    row = ids[i]
    if positions is None:
        for j in range(table.shape[1]):
            out[i, j] = table[row, j] * scale
    else:
        p = i % positions.shape[0]
        for j in range(table.shape[1]):
            out[i, j] = table[row, j] * scale + positions[p, j]


@njit(cache=True)
def _gather_serial(ids, table, scale, positions, out):
    for i in range(ids.shape[0]):
        _gather_row(ids, table, scale, positions, out, i)


@njit(cache=True, parallel=True)
def _gather_parallel(ids, table, scale, positions, out):
    for i in prange(ids.shape[0]):
        _gather_row(ids, table, scale, positions, out, i)


def embedding(ids, table, *, scale=1.0, positions=None, out=None):
    ids1, table, scale, positions, o2, result = spec.prepare(ids, table, scale, positions, out)
    if o2.size == 0:
        return result
    if o2.size >= _PARALLEL_MIN and ids1.shape[0] > 1:
        _gather_parallel(ids1, table, scale, positions, o2)
    else:
        _gather_serial(ids1, table, scale, positions, o2)
    return result


@njit(cache=True, parallel=True)
def _positions(offset, halves, out):
    length, dim = out.shape
    n_sin = (dim + 1) // 2
    denom = np.empty(dim)
    for j in range(dim):
        denom[j] = 10000.0 ** (2 * (j // 2) / dim)
    for i in prange(length):
        p = float(offset + i)
        for j in range(dim):
            if halves:
                # column j < n_sin: sin of angle column 2j; else cos of angle column 2(j - n_sin) + 1
                if j < n_sin:
                    out[i, j] = np.sin(p / denom[2 * j])
                else:
                    out[i, j] = np.cos(p / denom[2 * (j - n_sin) + 1])
            elif j % 2 == 0:
                out[i, j] = np.sin(p / denom[j])
            else:
                out[i, j] = np.cos(p / denom[j])


def sinusoidal_positions(length, dim, *, layout="interleaved", offset=0, dtype=np.float32):
    length, dim, offset, halves, dtype = spec.check_positions_args(length, dim, layout, offset, dtype)
    out = np.empty((length, dim), dtype=dtype)
    if out.size:
        _positions(offset, halves, out)
    return out
