"""Ops over 16-bit weights (``seqjit.kernels.linear_half``): ``linear_half`` and ``embedding_half``.

A 16-bit weight is a uint16 constant holding fp16 or bf16 bits; the ``fmt`` attribute says which
("float16" or "bfloat16"). Activations, outputs and positions are float32. ``linear_half``'s
``arith`` attribute says how its products are computed: "float32" (the weights widened) or, for
bfloat16 weights, "bfloat16" (x rounded to bf16, vdpbf16ps: :mod:`seqjit.kernels.linear_half.spec`).
"""
from __future__ import annotations

import threading
from functools import partial

import numpy as np

from seqjit.graph.native_ops import _ACT, _I64, Unsupported, _contig, _rows, _threads
from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, register
from seqjit.graph.ops.kernel_ops import ACTIVATIONS, _out
from seqjit.kernels.linear_half.spec import ARITHS, FORMATS
from seqjit.kernels.linear_half.packed import pack_bf16_pairs, pack_half_panels

_F32 = np.dtype(np.float32)
_U16 = np.dtype(np.uint16)


def _need_fmt(attrs, where):
    need(attrs["fmt"] in FORMATS, where, f"fmt must be 'float16' or 'bfloat16', got {attrs['fmt']!r}")


# -- linear_half: x [..., K] float32 @ widen(W [N, K] uint16)^T + b -> [..., N] float32 ---------------
def _linear_half_infer(specs, attrs):
    x, w, b = (list(specs) + [None, None])[:3]
    where = "linear_half"
    _need_fmt(attrs, where)
    need(x is not None and np.dtype(x.dtype) == _F32, where, f"x must be float32, got {x}")
    need(w is not None and len(w.shape) == 2 and np.dtype(w.dtype) == _U16, where,
         f"weight must be uint16 [N, K] (the {attrs['fmt']} bits), got {w}")
    need(attrs["activation"] in ACTIVATIONS, where, f"activation must be one of {ACTIVATIONS}, got {attrs['activation']!r}")
    need(attrs["arith"] in ARITHS, where, f"arith must be 'float32' or 'bfloat16', got {attrs['arith']!r}")
    need(attrs["arith"] == "float32" or attrs["fmt"] == "bfloat16", where,
         f"arith 'bfloat16' needs bfloat16 weights (fmt 'bfloat16'), got fmt {attrs['fmt']!r}")
    n, k = w.shape
    need(len(x.shape) >= 1 and x.shape[-1] == k, where, f"x's last dimension must be {k} (weight {list(w.shape)}), got {x}")
    need(b is None or (tuple(b.shape) == (n,) and np.dtype(b.dtype) == _F32), where, f"bias must be float32 [{n}], got {b}")
    return [TensorSpec(tuple(x.shape[:-1]) + (n,), _F32)]


def _linear_half_make(ctx):
    return partial(ctx.kernel("linear_half"), fmt=ctx.attrs["fmt"], activation=ctx.attrs["activation"],
                   arith=ctx.attrs["arith"], out=_out(ctx))


_PACK_LOCK = threading.Lock()


def _half_panels(lowering, name, w, pairs=False):
    """``w``'s panels (kernels/linear_half/packed.py; ``pairs``: the bf16 arithmetic's pair panels),
    made once per graph and shared by its plans."""
    with _PACK_LOCK:
        cache = lowering.plan.graph.__dict__.setdefault("_native_half_packed", {})
        wp = cache.get((name, pairs))
        if wp is None:
            wp = cache[(name, pairs)] = (pack_bf16_pairs if pairs else pack_half_panels)(w)
    return wp


def lower_linear_half(self, node, attrs):
    """One OP_LINEAR_HALF: rows of x, the uint16 weight packed in panels (a constant: packed once per
    graph; a computed weight has no native form), threads as the float linear's (the team of two
    from TEAM_MACS, the run's threads from PARALLEL_MACS). bf16 arithmetic: the pair panels, and a
    buffer of the plan for the rounded x (uint32 pairs, ceil(K / 2) a row)."""
    x, w, b = (list(node.inputs) + [None])[:3]
    (y,) = node.outputs
    m, k, ldx = _rows(self.arrays[x])
    wa = _contig(self.arrays[w], _U16)
    n = wa.shape[0]
    if b is not None:
        _contig(self.arrays[b])
    my, _, ldy = _rows(self.arrays[y])
    if my != m or w not in self.plan.graph.constants:
        raise Unsupported("linear_half rows, or a computed weight")
    arith = ARITHS[attrs["arith"]]
    wp = _half_panels(self, w, wa, pairs=bool(arith))
    xq = np.zeros(max(1, m * ((k + 1) // 2)), np.uint32) if arith else None
    self.emit("linear_half", x=x, w=wp, bias=b, y=y, xq=xq, m=m, k=k, n=n, ldx=ldx, ldy=ldy,
              act=_ACT[attrs["activation"]], fmt=FORMATS[attrs["fmt"]], arith=arith, threads=_threads(m * n * k))


register(OpDef("linear_half", ("x", "weight", "bias?"), _linear_half_infer, _linear_half_make,
               attrs={"fmt": REQUIRED, "activation": None, "arith": "float32"}, kernel="linear_half", native=lower_linear_half,
               native_kernel=True))


# -- embedding_half: rows of a uint16 table [V, D] -> float32 [..., L, D], times scale, + positions --
def _emb_half_infer(specs, attrs):
    ids, table = specs[:2]
    positions = specs[2] if len(specs) > 2 else None
    where = "embedding_half"
    _need_fmt(attrs, where)
    need(np.dtype(ids.dtype).kind in "iu", where, f"ids must be integers, got {ids}")
    need(len(table.shape) == 2 and np.dtype(table.dtype) == _U16, where,
         f"table must be uint16 [V, D] (the {attrs['fmt']} bits), got {table}")
    need(positions is None or (len(ids.shape) >= 1 and tuple(positions.shape) == (ids.shape[-1], table.shape[1])
                               and np.dtype(positions.dtype) == _F32), where,
         f"positions must be float32 [L, D] = [{ids.shape[-1] if ids.shape else '-'}, {table.shape[1]}], got {positions}")
    return [TensorSpec(tuple(ids.shape) + (table.shape[1],), _F32)]


def _emb_half_make(ctx):
    fn, out, scale, fmt = ctx.kernel("embedding_half"), _out(ctx), ctx.attrs["scale"], ctx.attrs["fmt"]
    return lambda ids, table, positions=None: fn(ids, table, fmt=fmt, scale=scale, positions=positions, out=out)


def lower_embedding_half(self, node, attrs):
    ids, table, pos = (list(node.inputs) + [None])[:3]
    (y,) = node.outputs
    ia, ta = _contig(self.arrays[ids], _I64), _contig(self.arrays[table], _U16)
    _contig(self.arrays[y])
    length = 1 if pos is None else _contig(self.arrays[pos]).shape[0]
    self.emit("embedding_half", ids=ids, table=table, positions=pos, y=y, n=ia.size, d=ta.shape[1], length=length,
              vocab=ta.shape[0], fmt=FORMATS[attrs["fmt"]], scale=float(np.float32(attrs["scale"])))


def _embedding_half_device(ctx):
    """As the float embedding's device function: ids made on the device (the decoding loop's tokens)
    are not copied back for the range check (the kernel never reads outside the table)."""
    from seqjit.graph.device_ops import _cuda  # (numba.cuda: imported on a device only)

    from seqjit.kernels.linear_half.cuda import embedding_half

    out, scale, fmt = ctx.outs[0] if ctx.outs else None, ctx.attrs["scale"], ctx.attrs["fmt"]

    def run(ids, table, positions=None):
        mirror = _cuda.host_mirror(ids)
        return embedding_half(ids, table, fmt=fmt, scale=scale, positions=positions, out=out, host_ids=mirror,
                              check_ids=mirror is not None or not _cuda.is_device_array(ids))

    return run


register(OpDef("embedding_half", ("ids", "table", "positions?"), _emb_half_infer, _emb_half_make,
               attrs={"fmt": REQUIRED, "scale": 1.0}, kernel="embedding_half", native=lower_embedding_half,
               native_kernel=True, device=_embedding_half_device))
