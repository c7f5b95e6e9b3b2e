"""NumPy reference of the layout kernels: the readable specification of :mod:`.cuda`.

- ``copy(src, dst)``: ``dst[...] = src`` (same shape, any strides: a transposed or sliced view in,
  a slice of a larger array out).
- ``add(a, b, out)``: ``out[...] = a + b`` with NumPy broadcasting of ``a`` and ``b`` to ``out``'s shape.
- ``fill(out, value)``: every element of ``out`` set to ``value`` (cast to ``out``'s dtype).
- ``gather_rows(src, index, dst)``: ``dst[i] = src[index[i]]`` along axis 0 (``index`` ints in
  ``[0, src.shape[0])``, one per row of ``dst``; ``src`` and ``dst`` must not overlap).

Arrays have at most 4 dimensions of size > 1 (the device kernels run on 4-D index spaces).
"""
from __future__ import annotations

import numpy as np


def copy(src, dst):
    np.copyto(dst, src)
    return dst


def add(a, b, out):
    np.add(a, b, out=out)
    return out


def fill(out, value):
    out[...] = value
    return out


def gather_rows(src, index, dst):
    np.take(src, np.asarray(index), axis=0, out=dst)
    return dst
