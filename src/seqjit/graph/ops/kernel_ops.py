"""Ops that bind to a ``seqjit.kernels`` function: linear, linear_int8, layer_norm, attention, embedding,
sinusoidal_positions, activations, softmax. Shapes below: B batch, L/S lengths, H heads, D dims.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, need_dtype_match, need_float, register, same_as

ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu", "tanh")


def _out(ctx, k=0):
    return ctx.outs[k] if ctx.outs else None


# -- linear: x [..., K] @ W + b -> [..., N] ------------------------------------------------------
def _linear_infer(specs, attrs):
    x, w, b = (list(specs) + [None, None])[:3]
    where = "linear"
    need_float(x, "x", where)
    need(w is not None and len(w.shape) == 2, where, f"weight must be 2-D, got {w}")
    need(attrs["activation"] in ACTIVATIONS, where, f"activation must be one of {ACTIVATIONS}, got {attrs['activation']!r}")
    layout = attrs["weight_layout"]
    need(layout in ("out_in", "in_out"), where, f"weight_layout must be 'out_in' or 'in_out', got {layout!r}")
    n, k = w.shape if layout == "out_in" else w.shape[::-1]
    need(len(x.shape) >= 1 and x.shape[-1] == k, where, f"x's last dimension must be {k} (weight {list(w.shape)}, {layout}), got {x}")
    need(b is None or tuple(b.shape) == (n,), where, f"bias must have shape [{n}], got {b}")
    need_dtype_match([x, w, b], ["x", "weight", "bias"], where)
    return [TensorSpec(tuple(x.shape[:-1]) + (n,), x.dtype)]


def _linear_make(ctx):
    # a partial (no Python frame of its own): called as linear(x, w, b)
    return partial(ctx.kernel("linear"), activation=ctx.attrs["activation"],
                   weight_layout=ctx.attrs["weight_layout"], out=_out(ctx))


register(OpDef("linear", ("x", "weight", "bias?"), _linear_infer, _linear_make,
               attrs={"activation": None, "weight_layout": "out_in"}, kernel="linear"))


# -- linear_int8: x [..., K] float32 @ (int8 W [N, K] * scale [N])^T + b -> [..., N] ----------------
def _linear_int8_infer(specs, attrs):
    x, w, scale, b = (list(specs) + [None])[:4]
    where = "linear_int8"
    need(x is not None and np.dtype(x.dtype) == np.float32, where, f"x must be float32, got {x}")
    need(w is not None and len(w.shape) == 2 and np.dtype(w.dtype) == np.int8, where, f"weight must be int8 [N, K], got {w}")
    need(attrs["activation"] in ACTIVATIONS, where, f"activation must be one of {ACTIVATIONS}, got {attrs['activation']!r}")
    n, k = w.shape
    need(len(x.shape) >= 1 and x.shape[-1] == k, where, f"x's last dimension must be {k} (weight {list(w.shape)}), got {x}")
    for name, s in (("scale", scale), ("bias", b)):
        if s is None and name == "bias":
            continue
        ok = s is not None and tuple(s.shape) == (n,) and np.dtype(s.dtype) == np.float32
        need(ok, where, f"{name} must be float32 [{n}], got {s}")
    return [TensorSpec(tuple(x.shape[:-1]) + (n,), x.dtype)]


def _linear_int8_make(ctx):
    return partial(ctx.kernel("linear_int8"), activation=ctx.attrs["activation"], out=_out(ctx))


register(OpDef("linear_int8", ("x", "weight", "scale", "bias?"), _linear_int8_infer, _linear_int8_make,
               attrs={"activation": None}, kernel="linear_int8"))


# -- layer_norm over the last axis ---------------------------------------------------------------
def _ln_infer(specs, attrs):
    x, w, b = (list(specs) + [None, None])[:3]
    need_float(x, "x", "layer_norm")
    d = x.shape[-1]
    for name, s in (("weight", w), ("bias", b)):
        need(s is None or tuple(s.shape) == (d,), "layer_norm", f"{name} must have shape [{d}], got {s}")
    need_dtype_match([x, w, b], ["x", "weight", "bias"], "layer_norm")
    return [x]


def _ln_make(ctx):
    return partial(ctx.kernel("layer_norm"), eps=ctx.attrs["eps"], out=_out(ctx))


register(OpDef("layer_norm", ("x", "weight", "bias"), _ln_infer, _ln_make, attrs={"eps": 1e-5}, kernel="layer_norm"))


# -- attention: q [B,H,Lq,D], k/v [B,H,Lk,D], lengths [B] -> [B,H,Lq,D] (+ weights [B,H,Lq,Lk]) ---
def _attn_infer(specs, attrs):
    q, k, v = specs[:3]
    lengths = specs[3] if len(specs) > 3 else None
    where = "attention"
    for name, s in (("q", q), ("k", k), ("v", v)):
        need_float(s, name, where)
        need(len(s.shape) == 4, where, f"{name} must be [B, H, L, D], got {s}")
    need(k.shape[:3] == v.shape[:3], where, f"k and v must match in batch, heads and length, got {k} and {v}")
    need(q.shape[:2] == k.shape[:2] and q.shape[3] == k.shape[3], where, f"q {q} does not match k {k} in batch, heads or head dim")
    need(lengths is None or tuple(lengths.shape) == (q.shape[0],), where, f"lengths must have shape [{q.shape[0]}], got {lengths}")
    need_dtype_match([q, k, v], ["q", "k", "v"], where)
    outs = [TensorSpec(q.shape[:3] + (v.shape[3],), q.dtype)]
    if attrs["return_weights"]:
        outs.append(TensorSpec(q.shape[:3] + (k.shape[2],), q.dtype))
    return outs


def _attn_make(ctx):
    fn, out = ctx.kernel("attention"), _out(ctx)
    causal, scale, weights = ctx.attrs["causal"], ctx.attrs["scale"], ctx.attrs["return_weights"]

    def attention(q, k, v, lengths=None):
        return fn(q, k, v, causal=causal, lengths=lengths, scale=scale, return_weights=weights, out=out)

    return attention


register(OpDef("attention", ("q", "k", "v", "lengths?"), _attn_infer, _attn_make,
               attrs={"causal": False, "scale": None, "return_weights": False},
               modes=lambda specs, attrs: ["out", "fresh"] if attrs["return_weights"] else ["out"],
               n_outputs=lambda attrs: 2 if attrs["return_weights"] else 1, kernel="attention"))


# -- embedding: ids [..., L] of table [V, D] -> [..., L, D], times scale, plus positions [L, D] ----
def _emb_infer(specs, attrs):
    ids, table = specs[:2]
    positions = specs[2] if len(specs) > 2 else None
    need(np.dtype(ids.dtype).kind in "iu", "embedding", f"ids must be integers, got {ids}")
    need(len(table.shape) == 2, "embedding", f"table must be [V, D], got {table}")
    shape = tuple(ids.shape) + (table.shape[1],)
    if positions is not None:
        need(len(ids.shape) >= 1 and tuple(positions.shape) == (ids.shape[-1], table.shape[1]), "embedding",
             f"positions must be [L, D] = [{ids.shape[-1] if ids.shape else '-'}, {table.shape[1]}] (L along the "
             f"last axis of ids {ids}), got {positions}")
        need_dtype_match([table, positions], ["table", "positions"], "embedding")
    return [TensorSpec(shape, table.dtype)]


def _emb_make(ctx):
    fn, out, scale = ctx.kernel("embedding"), _out(ctx), ctx.attrs["scale"]
    return lambda ids, table, positions=None: fn(ids, table, scale=scale, positions=positions, out=out)


register(OpDef("embedding", ("ids", "table", "positions?"), _emb_infer, _emb_make, attrs={"scale": 1.0}, kernel="embedding"))


# -- embedding_int8: rows of an int8 table [V, D] with per-row scales [V] -> float32 [..., L, D] ----
def _emb8_infer(specs, attrs):
    ids, table, row_scale = specs[:3]
    positions = specs[3] if len(specs) > 3 else None
    where = "embedding_int8"
    need(np.dtype(ids.dtype).kind in "iu", where, f"ids must be integers, got {ids}")
    need(len(table.shape) == 2 and np.dtype(table.dtype) == np.int8, where, f"table must be int8 [V, D], got {table}")
    need(tuple(row_scale.shape) == (table.shape[0],) and np.dtype(row_scale.dtype) == np.float32, where,
         f"scale must be float32 [{table.shape[0]}], got {row_scale}")
    need(positions is None or (len(ids.shape) >= 1 and tuple(positions.shape) == (ids.shape[-1], table.shape[1])
                               and np.dtype(positions.dtype) == np.float32), where,
         f"positions must be float32 [L, D] = [{ids.shape[-1] if ids.shape else '-'}, {table.shape[1]}], got {positions}")
    return [TensorSpec(tuple(ids.shape) + (table.shape[1],), np.dtype(np.float32))]


def _emb8_make(ctx):
    """NumPy glue: ``out = table[ids] * (row_scale[ids] * scale) (+ positions)``, in float32."""
    out_buf, scale = _out(ctx), np.float32(ctx.attrs["scale"])

    def embedding_int8(ids, table, row_scale, positions=None):
        if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
            raise ValueError(f"embedding_int8: ids must lie in [0, {table.shape[0]}), got values from {ids.min()} to {ids.max()}")
        out = out_buf if out_buf is not None else np.empty(ids.shape + (table.shape[1],), np.float32)
        np.multiply(table[ids], (row_scale[ids] * scale)[..., None], out=out)
        if positions is not None:
            np.add(out, positions, out=out)
        return out

    return embedding_int8


register(OpDef("embedding_int8", ("ids", "table", "scale", "positions?"), _emb8_infer, _emb8_make, attrs={"scale": 1.0}))


# -- sinusoidal_positions: () -> [length, dim] (constant-folded) ---------------------------------
def _sin_infer(specs, attrs):
    return [TensorSpec((int(attrs["length"]), int(attrs["dim"])), np.dtype(attrs["dtype"]))]


def _sin_make(ctx):
    fn, a = ctx.kernel("sinusoidal_positions"), ctx.attrs
    return lambda: fn(int(a["length"]), int(a["dim"]), layout=a["layout"], offset=int(a["offset"]), dtype=np.dtype(a["dtype"]))


register(OpDef("sinusoidal_positions", (), _sin_infer, _sin_make,
               attrs={"length": REQUIRED, "dim": REQUIRED, "layout": "interleaved", "offset": 0, "dtype": "float32"},
               modes=lambda specs, attrs: ["fresh"], kernel="sinusoidal_positions"))


# -- elementwise activations ---------------------------------------------------------------------
def _act_infer(name):
    def infer(specs, attrs):
        need_float(specs[0], "x", name)
        return [specs[0]]

    return infer


def _act_make(name):
    def make(ctx):
        if name == "gelu":
            return partial(ctx.kernel(name), approximate=ctx.attrs["approximate"], out=_out(ctx))
        return partial(ctx.kernel(name), out=_out(ctx))

    return make


for _name in ("relu", "silu", "tanh"):
    register(OpDef(_name, ("x",), _act_infer(_name), _act_make(_name), kernel=_name))
register(OpDef("gelu", ("x",), _act_infer("gelu"), _act_make("gelu"), attrs={"approximate": "none"}, kernel="gelu"))


# -- softmax / log_softmax over the last axis ----------------------------------------------------
def _softmax_make(name):
    def make(ctx):
        return partial(ctx.kernel(name), out=_out(ctx))

    return make


for _name in ("softmax", "log_softmax"):
    register(OpDef(_name, ("x", "mask?"), same_as(0), _softmax_make(_name), kernel=_name))
