"""Block-wide tree reductions for the numba.cuda kernels (device functions; import this module from
a ``cuda.py`` only: it imports numba.cuda).

Every thread of the block calls them with its own ``value`` and a shared array ``buf`` of at least
``blockDim.x`` elements (a power of two); every thread gets the result, and ``buf`` is free again
when they return.
"""
from __future__ import annotations

from numba import cuda


@cuda.jit(device=True, inline=True)
def block_sum(buf, tid, value):
    """The sum of ``value`` over the block's threads."""
    buf[tid] = value
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step:
            buf[tid] += buf[tid + step]
        cuda.syncthreads()
        step //= 2
    total = buf[0]
    cuda.syncthreads()
    return total


@cuda.jit(device=True, inline=True)
def block_max(buf, tid, value):
    """The largest ``value`` over the block's threads by ``>`` (a NaN never wins over a number)."""
    buf[tid] = value
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step and buf[tid + step] > buf[tid]:
            buf[tid] = buf[tid + step]
        cuda.syncthreads()
        step //= 2
    top = buf[0]
    cuda.syncthreads()
    return top
