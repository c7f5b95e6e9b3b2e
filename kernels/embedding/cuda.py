"""numba.cuda embedding (one thread block per token: gather, scale and positional add) and
sinusoidal position tables (one thread per element, angles in float64).

Host arrays in -> host array out; a device array in -> device array out (see seqjit.kernels._cuda).
``ids`` may be a device array: it is copied to the host once for the range check, unless the caller
gives its host copy (``host_ids``) or vouches for it (``check_ids=False``: ids a decode loop made on
the device); the kernel itself never reads outside the table (an id outside ``[0, V)`` gives a row of
NaN there).
``sinusoidal_positions`` returns a host array (upload it once with ``_cuda.to_device``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as _layout

from . import spec

_THREADS = 128
_NAN = np.float32(np.nan)
_dummy = None  # a device [1, 1] array standing in for absent positions (made once)


def _no_positions():
    global _dummy
    if _dummy is None:
        _dummy = _layout.zeros((1, 1), np.float32)
    return _dummy


@cuda.jit(cache=False)
def _gather(ids, table, scale, positions, has_positions, out):
    i = cuda.blockIdx.x
    row = ids[i]
    d = table.shape[1]
    valid = 0 <= row < table.shape[0]
    for j in range(cuda.threadIdx.x, d, cuda.blockDim.x):
        v = table[row, j] * scale if valid else _NAN
        if has_positions:
            v += positions[i % positions.shape[0], j]
        out[i, j] = v


@cuda.jit(cache=False)
def _positions(offset, halves, out):
    idx = cuda.grid(1)
    length, dim = out.shape
    if idx >= length * dim:
        return
    i = idx // dim
    j = idx % dim
    p = float(offset + i)
    n_sin = (dim + 1) // 2
    if halves:
        col = 2 * j if j < n_sin else 2 * (j - n_sin) + 1
    else:
        col = j
    angle = p / math.pow(10000.0, 2.0 * (col // 2) / dim)
    out[i, j] = math.sin(angle) if col % 2 == 0 else math.cos(angle)


def embedding(ids, table, *, scale=1.0, positions=None, out=None, host_ids=None, check_ids=True):
    """See :mod:`seqjit.kernels.embedding.spec`; ``host_ids`` / ``check_ids``: the module docstring."""
    on_device = _cuda.any_on_device(ids, table, positions, out)
    if _cuda.is_device_array(ids) and host_ids is None:
        if len(ids.shape) and np.dtype(ids.dtype).kind not in "iu":
            raise TypeError(f"ids must hold integers, got dtype {ids.dtype}")
        # unchecked: zeros of the ids' shape pass the range check (the kernel guards the table)
        host_ids = ids.copy_to_host() if check_ids else np.zeros(tuple(ids.shape), np.int64)
    ids1, table, scale, positions, _, shape = spec.prepare(ids, table, scale, positions, out, device=True, host_ids=host_ids)
    _cuda.require_float32("table", table)
    n, d = math.prod(shape[:-1]), shape[-1]
    dout = _cuda.device_out("out", out, shape, table.dtype)
    if n and d:
        dpos = _cuda.to_device(positions) if positions is not None else _no_positions()
        _gather[n, _cuda.row_threads(d, _THREADS)](
            _cuda.to_device(ids1), _cuda.to_device(table), np.float32(scale), dpos, positions is not None, dout.reshape(n, d)
        )
    return _cuda.finish(dout, out, on_device)


def sinusoidal_positions(length, dim, *, layout="interleaved", offset=0, dtype=np.float32):
    length, dim, offset, halves, dtype = spec.check_positions_args(length, dim, layout, offset, dtype)
    if dtype != np.float32:
        raise TypeError(f"dtype must be float32 on the cuda backend, got {dtype}")
    dout = _cuda.device_empty((length, dim), dtype)
    if length * dim:
        _positions[_cuda.grid_1d(length * dim)](offset, halves, dout)
    return dout.copy_to_host()
