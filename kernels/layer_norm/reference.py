"""NumPy reference for layer_norm: the readable specification (computed in float64, rounded once)."""
from __future__ import annotations

import numpy as np

from . import spec


def layer_norm(x, weight=None, bias=None, *, eps=1e-5, out=None):
    """Normalise ``x`` ``[..., D]`` over its last axis; ``weight``, ``bias``: ``[D]`` or None."""
    x2, w, b, eps, o2, result = spec.prepare(x, weight, bias, eps, out)
    x64 = x2.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    o2[...] = y
    return result
