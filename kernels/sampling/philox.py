"""The one random stream of sampling: Philox4x32-10, keyed by (seed, source row, step).

A counter-based generator (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC11; the
Random123 library's ``philox4x32_10``): the output is a pure function of a 128-bit counter and a
64-bit key, so any draw can be made anywhere (the Python loop, the native loop, a batch split over
threads or decoded in other batches) without carrying a generator state along, and every place that
makes it gets the same number.

The draw of source row ``row`` (its index in the caller's batch) at decoding step ``step``:

- key     = (seed mod 2**32, seed >> 32)                 (``0 <= seed < 2**64``)
- counter = (step mod 2**32, step >> 32, row mod 2**32, row >> 32)
- u       = ((out[0] << 32 | out[1]) >> 11) * 2**-53     (a double in [0, 1), 53 random bits)

This module is the readable specification (pure NumPy uint32/uint64 arithmetic, vectorised over
rows); ``native_philox.h`` is the C version the native sampling loop calls.
"""
from __future__ import annotations

import os

import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)   # the round multipliers
W0, W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)   # the key schedule's Weyl increments
ROUNDS = 10
SEED_LIMIT = 1 << 64
_LO = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def philox4x32(counter, key, rounds: int = ROUNDS) -> np.ndarray:
    """Philox4x32-``rounds`` of ``counter`` (uint32 ``[..., 4]``) under ``key`` (uint32 ``[..., 2]``,
    broadcast against the counters): uint32 ``[..., 4]``."""
    c = np.asarray(counter, np.uint32)
    k = np.asarray(key, np.uint32)
    if c.shape[-1:] != (4,) or k.shape[-1:] != (2,):
        raise ValueError(f"counter must be [..., 4] and key [..., 2] uint32, got {list(c.shape)} and {list(k.shape)}")
    c0, c1, c2, c3 = (c[..., i].astype(np.uint64) for i in range(4))
    k0, k1 = k[..., 0].astype(np.uint64), k[..., 1].astype(np.uint64)
    for r in range(rounds):
        if r:  # the key schedule, mod 2**32
            k0, k1 = (k0 + W0) & _LO, (k1 + W1) & _LO
        p0 = M0 * c0  # < 2**64: exact in uint64
        p1 = M1 * c2
        c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ k0, p1 & _LO, (p0 >> _32) ^ c3 ^ k1, p0 & _LO
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def check_seed(seed) -> int:
    """``seed`` as a Python int in [0, 2**64); ValueError naming ``seed`` otherwise."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < SEED_LIMIT:
        raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    return int(seed)


def fresh_seed() -> int:
    """A 64-bit seed from the operating system's entropy (for ``seed=None``: one per decode call)."""
    return int.from_bytes(os.urandom(8), "little")


def uniforms(seed: int, rows, step: int) -> np.ndarray:
    """float64 ``[len(rows)]``: the draw in [0, 1) of each source row in ``rows`` at ``step``."""
    seed = check_seed(seed)
    rows = np.asarray(rows, np.int64).reshape(-1)
    if step < 0 or (rows.size and rows.min() < 0):
        raise ValueError(f"rows and step must be >= 0, got step {step} and rows down to {rows.min() if rows.size else 0}")
    r = rows.astype(np.uint64)
    counter = np.empty((rows.shape[0], 4), np.uint32)
    counter[:, 0] = step & 0xFFFFFFFF
    counter[:, 1] = step >> 32
    counter[:, 2] = (r & _LO).astype(np.uint32)
    counter[:, 3] = (r >> _32).astype(np.uint32)
    key = np.array([seed & 0xFFFFFFFF, seed >> 32], np.uint32)
    out = philox4x32(counter, key).astype(np.uint64)
    bits = ((out[:, 0] << _32) | out[:, 1]) >> np.uint64(11)
    return bits.astype(np.float64) * 2.0 ** -53
