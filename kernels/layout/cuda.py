"""numba.cuda layout kernels on device arrays (see :mod:`.reference` for what each computes).

Every kernel runs over a 4-D index space: arrays of fewer dimensions get leading size-1 axes, and
arrays of more lose size-1 axes (strided views either way, nothing is copied). One thread handles
``_ITEMS`` elements in a grid-stride loop; any strides in, any strides out, so a transposed view, a
column slice or a ``[:, :, t]`` slice of a KV cache is read or written where it lies.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from seqjit.kernels import _cuda

_THREADS = 128
_ITEMS = 8  # elements per thread
_MAX_BLOCKS = 4096


def _launch_shape(n: int) -> tuple[int, int]:
    threads = _cuda.threads_for(-(-n // _ITEMS), _THREADS)
    return min(_MAX_BLOCKS, max(1, -(-n // (threads * _ITEMS)))), threads


def as4(x):
    """``x`` viewed as 4-D (leading size-1 axes added, or size-1 axes dropped); ValueError beyond."""
    shape, strides = list(x.shape), list(x.strides)
    while len(shape) > 4 and 1 in shape:
        k = shape.index(1)
        del shape[k], strides[k]
    if len(shape) > 4:
        raise ValueError(f"layout kernels take at most 4 axes of size > 1, got shape {list(x.shape)}")
    pad = 4 - len(shape)
    return _cuda.strided(x, (1,) * pad + tuple(shape), (0,) * pad + tuple(strides))


@cuda.jit(device=True, inline=True)
def _index4(i, B, C, D):
    """Flat index ``i`` of a C-ordered [A, B, C, D] array -> its (a, b, c, d)."""
    d = i % D
    r = i // D
    c = r % C
    r //= C
    return r // B, r % B, c, d


@cuda.jit(cache=False)
def _copy4(src, dst):
    A, B, C, D = dst.shape
    for i in range(cuda.grid(1), A * B * C * D, cuda.gridsize(1)):
        a, b_, c, d = _index4(i, B, C, D)
        dst[a, b_, c, d] = src[a, b_, c, d]


@cuda.jit(cache=False)
def _add4(x, y, out):
    A, B, C, D = out.shape
    for i in range(cuda.grid(1), A * B * C * D, cuda.gridsize(1)):
        a, b_, c, d = _index4(i, B, C, D)
        out[a, b_, c, d] = x[a, b_, c, d] + y[a, b_, c, d]


@cuda.jit(cache=False)
def _fill4(out, value):
    A, B, C, D = out.shape
    for i in range(cuda.grid(1), A * B * C * D, cuda.gridsize(1)):
        a, b_, c, d = _index4(i, B, C, D)
        out[a, b_, c, d] = value


@cuda.jit(cache=False)
def _gather4(src, index, dst):
    A, B, C, D = dst.shape
    for i in range(cuda.grid(1), A * B * C * D, cuda.gridsize(1)):
        a, b_, c, d = _index4(i, B, C, D)
        dst[a, b_, c, d] = src[index[a], b_, c, d]


def _check_shapes(name_a, a, name_b, b):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{name_a} and {name_b} must have one shape, got {list(a.shape)} and {list(b.shape)}")


def copy(src, dst):
    """``dst[...] = src`` on the device (same shape and dtype, any strides)."""
    _check_shapes("src", src, "dst", dst)
    if np.dtype(src.dtype) != np.dtype(dst.dtype):
        raise TypeError(f"src and dst must share one dtype, got {src.dtype} and {dst.dtype}")
    n = math.prod(dst.shape)
    if n:
        _copy4[_launch_shape(n)](as4(src), as4(dst))
    return dst


def add(a, b, out):
    """``out[...] = a + b``, ``a`` and ``b`` broadcast to ``out``'s shape (one float dtype)."""
    for name, x in (("a", a), ("b", b)):
        if np.dtype(x.dtype) != np.dtype(out.dtype):
            raise TypeError(f"{name} must have out's dtype {out.dtype}, got {x.dtype}")
    n = math.prod(out.shape)
    if n:
        shape = tuple(out.shape)
        _add4[_launch_shape(n)](as4(_cuda.broadcast_view(a, shape)), as4(_cuda.broadcast_view(b, shape)), as4(out))
    return out


def fill(out, value):
    """Every element of ``out`` set to ``value`` (cast to its dtype)."""
    n = math.prod(out.shape)
    if n:
        _fill4[_launch_shape(n)](as4(out), np.dtype(out.dtype).type(value))
    return out


def zeros(shape, dtype):
    """A device array of zeros, filled on the device (nothing is uploaded)."""
    return fill(_cuda.device_empty(shape, dtype), 0)


def gather_rows(src, index, dst):
    """``dst[i] = src[index[i]]`` along axis 0; ``index`` a device int array ``[dst.shape[0]]`` whose
    values are trusted (they come from the device: beam reordering); ``src`` and ``dst`` must not overlap."""
    if tuple(src.shape[1:]) != tuple(dst.shape[1:]) or np.dtype(src.dtype) != np.dtype(dst.dtype):
        raise ValueError(f"src and dst must match beyond axis 0, got {src.dtype} {list(src.shape)} and "
                         f"{dst.dtype} {list(dst.shape)}")
    if len(index.shape) != 1 or index.shape[0] != dst.shape[0] or np.dtype(index.dtype).kind not in "iu":
        raise ValueError(f"index must be an integer array [{dst.shape[0]}], got {index.dtype} {list(index.shape)}")
    n = math.prod(dst.shape)
    if n:
        s4, d4 = _rows4(src), _rows4(dst)
        _gather4[_launch_shape(n)](s4, index, d4)
    return dst


def _rows4(x):
    """``x`` as 4-D with its row axis first (trailing size-1 axes added, or later size-1 axes dropped)."""
    shape, strides = list(x.shape), list(x.strides)
    while len(shape) > 4 and 1 in shape[1:]:
        k = shape.index(1, 1)
        del shape[k], strides[k]
    if len(shape) > 4:
        raise ValueError(f"gather_rows takes at most 4 axes (the rows and 3 of size > 1), got shape {list(x.shape)}")
    pad = 4 - len(shape)
    return _cuda.strided(x, tuple(shape) + (1,) * pad, tuple(strides) + (0,) * pad)
