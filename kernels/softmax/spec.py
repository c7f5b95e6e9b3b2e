"""softmax / log_softmax over the last axis: the semantics every backend follows, argument checks and
output allocation.

``mask`` (optional, bool, broadcastable to ``x``): True keeps an element, False removes it from the
normalisation (its output is 0 for softmax and -inf for log_softmax).

Rows that are not ordinary finite numbers (one rule per row, checked in this order, over the kept
elements only; a removed element's value never matters):

1. a kept NaN or +inf: the whole row is NaN (removed elements included). This is what
   ``torch.softmax`` gives (+inf - +inf is NaN): the input is already broken, and NaN says so
   instead of hiding it behind plausible probabilities.
2. nothing kept, or every kept element -inf: all zeros from softmax and all -inf from log_softmax,
   never NaN. ``torch.softmax`` gives NaN here; seqjit does not, because a fully masked row (a
   padded query, an empty source) is normal in attention and must not poison what follows.
3. otherwise the ordinary result; a kept -inf element gives 0 (softmax) / -inf (log_softmax).

An empty shape (``(3, 0)``, ``(0, 5)``) gives an empty result of the same shape. Backends check for
rules 1 and 2 only off their normal path (after a non-finite row maximum or sum), so finite input
costs nothing extra.
"""
from __future__ import annotations

import math

import numpy as np

from seqjit.kernels import _checks


def prepare(x, mask, out, *, device: bool = False):
    """Check the arguments; return ``(x2d, mask2d or None, out2d, result)`` for the kernels.

    ``x2d`` is ``x`` viewed as ``[rows, n]``; ``mask2d`` is uint8 ``[rows, n]``; ``out2d`` is a
    ``[rows, n]`` view of ``result``, the array to return (``out`` itself when given). With
    ``device=True`` (cuda backend) no host output is made: ``out2d`` is None and ``result`` is the shape.
    """
    x = _checks.float_array("x", x)
    if len(x.shape) == 0:
        raise ValueError("x must have at least 1 dimension, got a scalar")
    shape = tuple(x.shape)
    n = shape[-1]
    rows = math.prod(shape[:-1])
    mask2d = None
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise TypeError(f"mask must have dtype bool (True = keep), got {mask.dtype}")
        try:
            mask = np.broadcast_to(mask, shape)
        except ValueError:
            raise ValueError(f"mask must be broadcastable to x's shape {list(shape)}, got {list(mask.shape)}") from None
        mask2d = np.ascontiguousarray(mask).view(np.uint8).reshape(rows, n)
    if device:
        return x.reshape(rows, n), mask2d, None, shape
    result = _checks.out_array("out", out, shape, x.dtype)
    return x.reshape(rows, n), mask2d, result.reshape(rows, n), result
