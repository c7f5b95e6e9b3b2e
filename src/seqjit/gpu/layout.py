"""Device layout kernels the cuda kernel library leaves to the caller: heads split/merge, residual add.

All take and return numba device arrays (float32), writing into a caller-provided device output.
"""
from __future__ import annotations

from numba import cuda

_THREADS = 128


@cuda.jit
def _split_heads(x, heads, out):
    """x [B, L, H*Dh] -> out [B, H, L, Dh]."""
    i = cuda.grid(1)
    B, L, E = x.shape
    if i >= B * L * E:
        return
    e = i % E
    bl = i // E
    l = bl % L
    b = bl // L
    dh = E // heads
    out[b, e // dh, l, e % dh] = x[b, l, e]


@cuda.jit
def _merge_heads(x, out):
    """x [B, H, L, Dh] -> out [B, L, H*Dh]."""
    i = cuda.grid(1)
    B, H, L, Dh = x.shape
    if i >= B * H * L * Dh:
        return
    d = i % Dh
    r = i // Dh
    l = r % L
    r //= L
    h = r % H
    b = r // H
    out[b, l, h * Dh + d] = x[b, h, l, d]


@cuda.jit
def _add(a, b, out):
    """1-D: out = a + b."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


def _blocks(n: int) -> int:
    return max(1, (n + _THREADS - 1) // _THREADS)


def split_heads(x, heads: int, out):
    B, L, E = x.shape
    _split_heads[_blocks(B * L * E), _THREADS](x, heads, out)
    return out


def merge_heads(x, out):
    B, H, L, Dh = x.shape
    _merge_heads[_blocks(B * H * L * Dh), _THREADS](x, out)
    return out


def add(a, b, out):
    n = out.size
    _add[_blocks(n), _THREADS](a.reshape(n), b.reshape(n), out.reshape(n))
    return out
