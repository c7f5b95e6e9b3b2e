"""numba.cuda linear_half and embedding_half: 16-bit weights kept 16-bit on the device, widened there.

The weight (or the embedding rows looked up) is read as uint16 and widened on the device into a
float32 scratch, written through its uint32 view: bf16 by a 16-bit shift, fp16 by the bit
conversion (exponent rebias; a subnormal normalised; inf and NaN payloads kept), both exact. The
product is then :mod:`seqjit.kernels.linear`'s cuda linear on the widened weight (its GEMV up to 16
rows, its tiled GEMM past them), so the GPU path holds the weights in 16 bits and computes as the
float32 one. The scratch is one float32 copy of the weight per call: written for correctness (it is
tested on the CUDA simulator), not for speed. bf16 arithmetic (``arith="bfloat16"``): x rounded to bf16
on the device (as the CPU kernels round it: float32 subnormals to zero, NaN quiet) and the weights'
bf16 subnormals zeroed as they are widened; the products are then exact and the same float32 linear
sums them (in its own order: within float32 rounding of the CPU's vdpbf16ps chain, not bit for bit). Host arrays in -> host array out; a device array in ->
device array out (see seqjit.kernels._cuda).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, uint32

from seqjit.kernels import _cuda
from seqjit.kernels.linear import cuda as _linear

from . import spec

_THREADS = 128


@cuda.jit(device=True, inline=True)
def _bits(h, bf):
    """The float32 bits of 16-bit value ``h`` (bf: bfloat16, else IEEE fp16)."""
    v = uint32(h)
    if bf:
        return v << uint32(16)
    sign = (v & uint32(0x8000)) << uint32(16)
    e = (v >> uint32(10)) & uint32(0x1F)
    m = v & uint32(0x3FF)
    if e == uint32(0x1F):
        return sign | uint32(0x7F800000) | (m << uint32(13))
    if e != uint32(0):
        return sign | ((e + uint32(112)) << uint32(23)) | (m << uint32(13))
    if m == uint32(0):
        return sign
    e = uint32(113)  # a subnormal m * 2^-24: shift m up to its leading bit, lowering the exponent
    while (m & uint32(0x400)) == uint32(0):
        m = m << uint32(1)
        e -= uint32(1)
    return sign | (e << uint32(23)) | ((m & uint32(0x3FF)) << uint32(13))


@cuda.jit(cache=False)
def _widen(w, bf, daz, out_bits):
    i = cuda.grid(1)
    n, k = w.shape
    if i < n * k:
        v = _bits(w[i // k, i % k], bf)
        if daz and (v & uint32(0x7F800000)) == uint32(0):  # a bf16 subnormal read as zero (vdpbf16ps)
            v = v & uint32(0x80000000)
        out_bits[i // k, i % k] = v


@cuda.jit(cache=False)
def _round_bf16(x_bits, out_bits):
    """out = x rounded to bf16 (nearest, ties to even; a subnormal to a zero of its sign; NaN quiet),
    as float32 bits"""
    i = cuda.grid(1)
    m, k = x_bits.shape
    if i < m * k:
        b = x_bits[i // k, i % k]
        if (b & uint32(0x7F800000)) == uint32(0):
            r = b & uint32(0x80000000)
        elif (b & uint32(0x7FFFFFFF)) > uint32(0x7F800000):
            r = (b & uint32(0xFFFF0000)) | uint32(0x00400000)
        else:
            r = ((b + uint32(0x7FFF) + ((b >> uint32(16)) & uint32(1))) >> uint32(16)) << uint32(16)
        out_bits[i // k, i % k] = r


@cuda.jit(cache=False)
def _gather_bits(ids, table, bf, out_bits):
    i = cuda.blockIdx.x
    row = ids[i]
    d = table.shape[1]
    valid = 0 <= row < table.shape[0]
    for j in range(cuda.threadIdx.x, d, cuda.blockDim.x):
        out_bits[i, j] = _bits(table[row, j], bf) if valid else uint32(0x7FC00000)  # NaN outside the table


@cuda.jit(cache=False)
def _scale_add(out, scale, positions, has_positions):
    i = cuda.blockIdx.x
    for j in range(cuda.threadIdx.x, out.shape[1], cuda.blockDim.x):
        v = out[i, j] * scale
        if has_positions:
            v += positions[i % positions.shape[0], j]
        out[i, j] = v


def widen_device(w, code, daz=False):
    """The float32 device array of uint16 bits ``w`` [N, K] (host or device) in format ``code``
    (``daz``: bf16 subnormals as zero)."""
    n, k = w.shape
    wide = _cuda.device_empty((n, k), np.float32)
    if n * k:
        _widen[_cuda.grid_1d(n * k)](_cuda.to_device(w), code == spec.BFLOAT16, bool(daz), wide.view(np.uint32))
    return wide


def round_bf16_device(x2):
    """The float32 device array [M, K] of float32 ``x2`` [M, K] (host or device) rounded to bf16."""
    m, k = x2.shape
    dx = _cuda.to_device(x2)
    r = _cuda.device_empty((m, k), np.float32)
    if m * k:
        _round_bf16[_cuda.grid_1d(m * k)](dx.view(np.uint32), r.view(np.uint32))
    return r


def linear_half(x, weight, bias=None, *, fmt, activation=None, arith="float32", out=None):
    """See :mod:`seqjit.kernels.linear_half.spec`."""
    acode = spec.arith_code(arith, fmt)
    x2, _, _, _, _, _, shape = spec.prepare_linear(x, weight, bias, fmt, activation, out, device=True)  # checked first
    wide = widen_device(weight, spec.format_code(fmt), daz=bool(acode))
    if acode:
        x = round_bf16_device(x2).reshape(tuple(shape[:-1]) + (x2.shape[1],))
    return _linear.linear(x, wide, bias, activation=activation, out=out)


def embedding_half(ids, table, *, fmt, scale=1.0, positions=None, out=None, host_ids=None, check_ids=True):
    """See :mod:`seqjit.kernels.linear_half.spec` (``host_ids`` / ``check_ids`` as the cuda embedding's)."""
    on_device = _cuda.any_on_device(ids, table, positions, out)
    if _cuda.is_device_array(ids) and host_ids is None:
        if len(ids.shape) and np.dtype(ids.dtype).kind not in "iu":
            raise TypeError(f"ids must hold integers, got dtype {ids.dtype}")
        host_ids = ids.copy_to_host() if check_ids else np.zeros(tuple(ids.shape), np.int64)
    ids1, table, code, scale, positions, _, shape = spec.prepare_embedding(ids, table, fmt, scale, positions, out,
                                                                          device=True, host_ids=host_ids)
    n, d = math.prod(shape[:-1]), shape[-1]
    dout = _cuda.device_out("out", out, shape, np.dtype(np.float32))
    if n and d:
        o2 = dout.reshape(n, d)
        threads = _cuda.row_threads(d, _THREADS)
        _gather_bits[n, threads](_cuda.to_device(ids1), _cuda.to_device(table), code == spec.BFLOAT16,
                                 o2.view(np.uint32))
        if scale != 1.0 or positions is not None:
            dpos = _cuda.to_device(positions) if positions is not None else o2
            _scale_add[n, threads](o2, np.float32(scale), dpos, positions is not None)
    return _cuda.finish(dout, out, on_device)
