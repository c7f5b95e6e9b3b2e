"""attention: argument checks and output allocation, shared by every backend.

``attention(q, k, v, *, causal=False, lengths=None, scale=None, return_weights=False, out=None)``

- ``q`` ``[B, H, Lq, D]``, ``k`` ``[B, H, Lk, D]``, ``v`` ``[B, H, Lk, Dv]``: one float dtype.
- ``lengths`` (optional) ``[B]`` integers in ``[0, Lk]``: the number of valid keys of each batch row.
- ``causal``: query ``i`` sees key ``j`` only if ``j <= i + (Lk - Lq)`` (the last query is aligned with
  the last key: PyTorch's ``is_causal`` when ``Lq == Lk``, and what a decode step over a cache needs).
- ``scale`` (optional, positive): scores are ``scale * q @ k^T``; default ``1 / sqrt(D)``.

Every query therefore sees a *prefix* of the keys, ``j < visible(b, i)`` with
``visible(b, i) = min(lengths[b], i + Lk - Lq + 1 if causal else Lk)`` (clipped at 0): the kernels use
that prefix form. A query that sees no key gets an all-zero output row (and zero weights), never NaN.

Returns ``out`` ``[B, H, Lq, Dv]``, or ``(out, weights)`` with ``weights`` ``[B, H, Lq, Lk]`` when
``return_weights``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from seqjit.kernels import _checks


class Problem(NamedTuple):
    """Checked arguments. ``lengths`` is always an int64 ``[B]`` array (``Lk`` where not given).

    ``out`` / ``weights`` are host arrays to fill (``weights`` None unless asked for); with
    ``device=True`` (cuda backend) ``out`` is the caller's ``out`` unchecked and ``weights`` is None.
    """

    q: object
    k: object
    v: object
    lengths: np.ndarray
    causal: bool
    scale: float
    return_weights: bool
    out: object
    weights: object

    @property
    def shape(self) -> tuple[int, int, int, int, int, int]:
        """``(B, H, Lq, Lk, D, Dv)``."""
        B, H, Lq, D = self.q.shape
        return B, H, Lq, self.k.shape[2], D, self.v.shape[3]

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        B, H, Lq, _, _, Dv = self.shape
        return (B, H, Lq, Dv)

    @property
    def weights_shape(self) -> tuple[int, int, int, int]:
        B, H, Lq, Lk, _, _ = self.shape
        return (B, H, Lq, Lk)

    def result(self):
        return (self.out, self.weights) if self.return_weights else self.out


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def prepare(q, k, v, *, causal=False, lengths=None, scale=None, return_weights=False, out=None,
            device: bool = False) -> Problem:
    """Check every argument (naming it in the error) and allocate the host outputs."""
    q = _checks.float_array("q", q, ndim=4)
    k = _checks.float_array("k", k, ndim=4)
    v = _checks.float_array("v", v, ndim=4)
    _checks.same_dtype(q.dtype, k=k, v=v)
    B, H, Lq, D = q.shape
    if D < 1:
        raise ValueError(f"q must have shape [B, H, Lq, D] with D >= 1, got {list(q.shape)}")
    _checks.check_shape("k", k, (B, H, None, D), what="[B, H, Lk, D] with q's B, H and D")
    Lk = k.shape[2]
    _checks.check_shape("v", v, (B, H, Lk, None), what="[B, H, Lk, Dv] with k's B, H and Lk")
    causal = _flag("causal", causal)
    return_weights = _flag("return_weights", return_weights)
    scale = 1.0 / math.sqrt(D) if scale is None else _checks.positive_float("scale", scale)
    if lengths is None:
        lengths = np.full(B, Lk, dtype=np.int64)
    else:
        if _checks.is_device_array(lengths):
            lengths = lengths.copy_to_host()
        lengths = _checks.lengths_array("lengths", lengths, B, Lk)
    Dv = v.shape[3]
    if device:
        return Problem(q, k, v, lengths, causal, scale, return_weights, out, None)
    out = _checks.out_array("out", out, (B, H, Lq, Dv), q.dtype)
    weights = np.empty((B, H, Lq, Lk), dtype=q.dtype) if return_weights else None
    return Problem(q, k, v, lengths, causal, scale, return_weights, out, weights)


def visible_keys(lengths: np.ndarray, Lq: int, Lk: int, causal: bool) -> np.ndarray:
    """``[B, Lq]`` int64: how many leading keys each query sees (the prefix rule above)."""
    limit = np.minimum(np.arange(Lq, dtype=np.int64) + (Lk - Lq + 1), Lk) if causal else np.full(Lq, Lk, np.int64)
    return np.clip(np.minimum(lengths[:, None], limit[None, :]), 0, None)
