"""NumPy reference for linear: the readable specification (float64 GEMM, rounded once)."""
from __future__ import annotations

import numpy as np

from seqjit.kernels.activations.reference import apply as _activate

from . import spec


def linear(x, weight, bias=None, *, activation=None, weight_layout="out_in", out=None):
    """``activation(x @ W^T + bias)``: x ``[..., K]``, weight ``[N, K]`` ("out_in") or ``[K, N]``
    ("in_out"), bias ``[N]`` or None -> ``[..., N]``."""
    x2, w, b, code, out_in, o2, result = spec.prepare(x, weight, bias, activation, weight_layout, out)
    w64 = w.astype(np.float64)
    y = x2.astype(np.float64) @ (w64.T if out_in else w64)
    if b is not None:
        y = y + b
    o2[...] = _activate(y, code)
    return result
