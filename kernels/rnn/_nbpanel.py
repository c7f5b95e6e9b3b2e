"""The panel GEMM of the large-batch float32 path, for Numba kernels (no BLAS).

A weight matrix ``W [G*H, K]`` is packed once per call (:func:`pack`) into panels of 32 hidden units
of one gate: panel ``p = u*G + g`` holds ``wp[p*K*32 + k*32 + c] = W[g*H + 32u + c, k]`` (zero past
``H``). :func:`panel_rows` then computes ``out[i, c] = h[i] . W[row of panel column c]`` with an
outer-product micro-kernel: per ``k`` it loads the panel's 32 values as vectors and multiplies them
by ``MR`` broadcast state values into vector accumulators that stay in registers for the whole ``k``
loop (no horizontal sums, unlike the dot-product kernel of :mod:`._nbgemm`): 2 vectors of 16 floats x
8 rows with AVX-512 (16 of its 32 registers), 4 vectors of 8 floats x 3 rows otherwise (12 of 16).
LLVM does not find this register blocking by itself from Numba code, so the micro-kernel is an
intrinsic that writes the vector IR directly.
"""
from __future__ import annotations

import llvmlite.binding as ll
import numba
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

NR = 32  # hidden units (columns) per panel


def _host_avx512() -> bool:
    """Whether Numba compiles for this host and the host has AVX-512 (32 vector registers)."""
    if numba.config.CPU_NAME or numba.config.CPU_FEATURES:
        return False
    try:
        features = ll.get_host_cpu_features()
        return bool(features.get("avx512f")) and bool(features.get("avx512vl"))
    except Exception:  # not x86, or no feature detection
        return False


# AVX-512: 2 vectors of 16 floats per panel row x 8 state rows (16 accumulators of the 32 registers);
# otherwise 4 vectors of 8 floats x 3 rows (12 of the 16 AVX2 registers)
_VW, MR = (16, 8) if _host_avx512() else (8, 3)


def _micro_kernel(mr: int):
    """An intrinsic ``k(wp, wo, h, roff, ro, K, out, oo, ldo)`` on vectors of ``_VW`` floats: for
    ``i < mr`` and ``c < 32``,
    ``out.flat[oo + i*ldo + c] = sum_k h.flat[roff[ro + i] + k] * wp.flat[wo + k*32 + c]`` (float32
    C-contiguous arrays, int64 ``roff``, element offsets; the caller guarantees the ranges)."""

    @intrinsic
    def kernel(typingctx, wp, wo, h, roff, ro, K, out, oo, ldo):
        arrays = (wp, h, out)
        if not all(isinstance(a, types.Array) and a.dtype == types.float32 for a in arrays):
            return None
        if not (isinstance(roff, types.Array) and roff.dtype == types.int64):
            return None
        if not all(isinstance(n, types.Integer) for n in (wo, ro, K, oo, ldo)):
            return None
        sig = types.void(wp, wo, h, roff, ro, K, out, oo, ldo)

        def codegen(context, builder, signature, args):
            at = signature.args
            wp_p, h_p, roff_p, out_p = (
                context.make_array(at[j])(context, builder, args[j]).data for j in (0, 2, 3, 6)
            )
            i64 = ir.IntType(64)
            wo_v, ro_v, K_v, oo_v, ldo_v = (
                context.cast(builder, args[j], at[j], types.int64) for j in (1, 4, 5, 7, 8)
            )
            f32 = ir.FloatType()
            vec = ir.VectorType(f32, _VW)
            vptr = vec.as_pointer()
            zero = ir.Constant(vec, [0.0] * _VW)
            undef = ir.Constant(vec, ir.Undefined)
            splat_mask = ir.Constant(ir.VectorType(ir.IntType(32), _VW), [0] * _VW)
            nv = NR // _VW
            # llvm.fmuladd: one FMA where the CPU has it, a multiply and an add otherwise
            fmuladd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3),
                                                     f"llvm.fmuladd.v{_VW}f32")
            # accumulators: allocas in the entry block, promoted to registers by mem2reg/SROA
            acc = [[cgutils.alloca_once_value(builder, zero) for _ in range(nv)] for _ in range(mr)]
            roffs = [builder.load(builder.gep(roff_p, [builder.add(ro_v, ir.Constant(i64, i))])) for i in range(mr)]
            rows = [builder.gep(h_p, [r]) for r in roffs]
            wbase = builder.gep(wp_p, [wo_v])
            with cgutils.for_range(builder, K_v) as loop:
                k = loop.index
                wk = builder.gep(wbase, [builder.mul(k, ir.Constant(i64, NR))])
                b = [
                    builder.load(builder.bitcast(builder.gep(wk, [ir.Constant(i64, _VW * v)]), vptr), align=4)
                    for v in range(nv)
                ]
                for i in range(mr):
                    a = builder.load(builder.gep(rows[i], [k]))
                    av = builder.shuffle_vector(builder.insert_element(undef, a, ir.Constant(i64, 0)), undef,
                                                splat_mask)
                    for v in range(nv):
                        builder.store(builder.call(fmuladd, [av, b[v], builder.load(acc[i][v])]), acc[i][v])
            obase = builder.gep(out_p, [oo_v])
            for i in range(mr):
                orow = builder.gep(obase, [builder.mul(ldo_v, ir.Constant(i64, i))])
                for v in range(nv):
                    dst = builder.bitcast(builder.gep(orow, [ir.Constant(i64, _VW * v)]), vptr)
                    builder.store(builder.load(acc[i][v]), dst, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return kernel


_KERNELS = tuple(_micro_kernel(m) for m in range(1, MR + 1))
_k1, _k2, _k3 = _KERNELS[0], _KERNELS[1], _KERNELS[2]
_k4, _k5, _k6, _k7, _k8 = _KERNELS[3:] if MR == 8 else (_k1,) * 5  # (unused without AVX-512)


@njit(cache=True)
def panel_rows(wp, wo, h, roff, nb, out, o0, ldo, nc, scratch, so):
    """``out.flat[o0 + i*ldo + c] = h.flat[roff[i] : roff[i] + K] . (panel at wp.flat[wo:], column c)``
    for ``i < nb``, ``c < nc`` (``nc <= 32``, ``K = h``'s row length); a partial panel goes through
    ``scratch.flat[so : so + MR*32]``."""
    K = h.shape[1]
    i = 0
    while i < nb:
        r = min(MR, nb - i)
        full = nc == NR
        dst, d0, dld = (out, o0 + i * ldo, ldo) if full else (scratch, so, NR)
        if r == 8:
            _k8(wp, wo, h, roff, i, K, dst, d0, dld)
        elif r == 7:
            _k7(wp, wo, h, roff, i, K, dst, d0, dld)
        elif r == 6:
            _k6(wp, wo, h, roff, i, K, dst, d0, dld)
        elif r == 5:
            _k5(wp, wo, h, roff, i, K, dst, d0, dld)
        elif r == 4:
            _k4(wp, wo, h, roff, i, K, dst, d0, dld)
        elif r == 3:
            _k3(wp, wo, h, roff, i, K, dst, d0, dld)
        elif r == 2:
            _k2(wp, wo, h, roff, i, K, dst, d0, dld)
        else:
            _k1(wp, wo, h, roff, i, K, dst, d0, dld)
        if not full:
            sf = scratch.reshape(-1)
            of = out.reshape(-1)
            for q in range(r):
                for c in range(nc):
                    of[o0 + (i + q) * ldo + c] = sf[so + q * NR + c]
        i += MR


@njit(cache=True)
def pack(w, H, G, wp, p0, p1):
    """Panels ``p0 <= p < p1`` of ``w [G*H, K]`` into ``wp`` (layout in the module docstring)."""
    K = w.shape[1]
    for p in range(p0, p1):
        u = p // G
        g = p % G
        base = p * K * NR
        for c in range(NR):
            j = u * NR + c
            if j < H:
                for k in range(K):
                    wp[base + k * NR + c] = w[g * H + j, k]
            else:
                for k in range(K):
                    wp[base + k * NR + c] = 0
