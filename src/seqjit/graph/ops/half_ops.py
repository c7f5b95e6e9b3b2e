"""Ops over 16-bit weights (``seqjit.kernels.linear_half``): ``linear_half`` and ``embedding_half``.

A 16-bit weight is a uint16 constant holding fp16 or bf16 bits; the ``fmt`` attribute says which
("float16" or "bfloat16"). Activations, outputs and positions are float32.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, register
from seqjit.graph.ops.kernel_ops import ACTIVATIONS, _out
from seqjit.kernels.linear_half.spec import FORMATS

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
    n, k = w.shape
    need(len(x.shape) >= 1 and x.shape[-1] == k, where, f"x's last dimension must be {k} (weight {list(w.shape)}), got {x}")
    need(b is None or (tuple(b.shape) == (n,) and np.dtype(b.dtype) == _F32), where, f"bias must be float32 [{n}], got {b}")
    return [TensorSpec(tuple(x.shape[:-1]) + (n,), _F32)]


def _linear_half_make(ctx):
    return partial(ctx.kernel("linear_half"), fmt=ctx.attrs["fmt"], activation=ctx.attrs["activation"], out=_out(ctx))


register(OpDef("linear_half", ("x", "weight", "bias?"), _linear_half_infer, _linear_half_make,
               attrs={"fmt": REQUIRED, "activation": None}, kernel="linear_half"))


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


register(OpDef("embedding_half", ("ids", "table", "positions?"), _emb_half_infer, _emb_half_make,
               attrs={"fmt": REQUIRED, "scale": 1.0}, kernel="embedding_half"))
