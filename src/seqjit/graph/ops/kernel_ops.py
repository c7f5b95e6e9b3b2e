"""Ops that bind to a ``seqjit.kernels`` function: linear, linear_int8, layer_norm, attention, embedding,
sinusoidal_positions, activations, softmax. Shapes below: B batch, L/S lengths, H heads, D dims.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from seqjit.graph import kernel_choice
from seqjit.graph.native_ops import (_ACT, _F32, _I64, LAYOUT_IN_OUT, LAYOUT_OUT_IN, LAYOUT_PACKED, PACK_MAX_BYTES,
                                     PARALLEL_MACS, Unsupported, _contig, _rows, _threads)
from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, need_dtype_match, need_float, register, same_as
from seqjit.kernels.activations import spec as act_spec
from seqjit.kernels.linear_int8 import huge_pages

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


def lower_linear(self, node, attrs):
    x, w, b = (list(node.inputs) + [None])[:3]
    (y,) = node.outputs
    m, k, ldx = _rows(self.arrays[x])
    wa = _contig(self.arrays[w])
    my, n, ldy = _rows(self.arrays[y])  # n: the output width, whatever the weight layout
    if b is not None:
        _contig(self.arrays[b])
    if my != m:
        raise Unsupported("rows")
    threads = _threads(m * n * k)
    layout = LAYOUT_OUT_IN if attrs["weight_layout"] == "out_in" else LAYOUT_IN_OUT
    weight = w
    # packed or as stored: by measurement on this host (kernel_choice); computed weights: as they are
    if wa.nbytes <= PACK_MAX_BYTES and w in self.plan.graph.constants and kernel_choice.choose(m, k, n) == "packed":
        weight, layout = self._packed(w, wa, attrs["weight_layout"]), LAYOUT_PACKED
    self.emit("linear", x=x, w=weight, bias=b, y=y, m=m, k=k, n=n, ldx=ldx, ldy=ldy, act=_ACT[attrs["activation"]],
              layout=layout, threads=threads)


register(OpDef("linear", ("x", "weight", "bias?"), _linear_infer, _linear_make,
               attrs={"activation": None, "weight_layout": "out_in"}, kernel="linear", native=lower_linear,
               native_kernel=True))


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


def lower_linear_int8(self, node, attrs):
    x, w, scale, b = (list(node.inputs) + [None])[:4]
    (y,) = node.outputs
    m, k, ldx = _rows(self.arrays[x])
    n = _contig(self.arrays[w], np.dtype(np.int8)).shape[0]
    _contig(self.arrays[scale])
    if b is not None:
        _contig(self.arrays[b])
    my, _, ldy = _rows(self.arrays[y])
    if my != m or k > 65536:
        raise Unsupported("linear_int8 shape")
    qx, xsum, xs = np.zeros(m * k, np.int8), np.zeros(m, np.int32), np.zeros(m, np.float32)
    huge_pages.advise(self.arrays[w])  # streamed from memory every step: 2 MB pages if large (in place)
    # a decode step's rows (up to 4): products from TEAM_MACS split in two halves over the team of two
    # (measured in benchmarks/RESULTS.md), the largest (the output projection) too
    # when the run has 2 threads (else OpenMP on all of them); more rows: OpenMP for large products
    threads = _threads(m * n * k) if m <= 4 else (0 if m * n * k >= PARALLEL_MACS else 1)
    self.emit("linear_int8", x=x, w=w, scale=scale, bias=b, y=y, qx=qx, xsum=xsum, xs=xs, m=m, k=k, n=n, ldx=ldx,
              ldy=ldy, act=_ACT[attrs["activation"]], threads=threads, keep=[qx, xsum, xs])


register(OpDef("linear_int8", ("x", "weight", "scale", "bias?"), _linear_int8_infer, _linear_int8_make,
               attrs={"activation": None}, kernel="linear_int8", native=lower_linear_int8))


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


def lower_layer_norm(self, node, attrs):
    x, g, b = node.inputs
    (y,) = node.outputs
    m, d, ldx = _rows(self.arrays[x])
    _, _, ldy = _rows(self.arrays[y])
    self.emit("layer_norm", x=x, weight=g, bias=b, y=y, m=m, d=d, ldx=ldx, ldy=ldy, eps=attrs["eps"])


register(OpDef("layer_norm", ("x", "weight", "bias"), _ln_infer, _ln_make, attrs={"eps": 1e-5}, kernel="layer_norm",
               native=lower_layer_norm, native_kernel=True))


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


def _lower_attention(self, node, attrs, q, k, v, lengths, bias):
    """attention, or biased_attention (``bias`` [1 or B, H, Lq, Lk] added to the scaled scores)."""
    (o,) = node.outputs
    arrs = [self.arrays[n] for n in (q, k, v, o)]
    for a in arrs:
        if a.dtype != _F32 or a.ndim != 4 or (a.shape[3] > 1 and a.strides[3] != 4):
            raise Unsupported("attention layout")
    if lengths is not None:
        _contig(self.arrays[lengths], _I64)
    qa, ka, va, _ = arrs
    B, H, Lq, D = qa.shape
    Lk, Dv = ka.shape[2], va.shape[3]
    bias_strides = [0, 0, 0]
    if bias is not None:
        ba = self.arrays[bias]
        if ba.dtype != _F32 or ba.ndim != 4 or (Lk > 1 and ba.strides[3] != 4):
            raise Unsupported("attention bias layout")
        bias_strides = [0 if ba.shape[0] == 1 else ba.strides[0] // 4, ba.strides[1] // 4, ba.strides[2] // 4]
    scale = float(np.float32(1.0 / math.sqrt(D) if attrs["scale"] is None else attrs["scale"]))
    scratch = np.zeros(max(Lq * Lk, 1), np.float32)
    (qb, qh, ql), (kb, kh, kl), (vb, vh, vl), (ob, oh, ol) = ([s // 4 for s in a.strides[:3]] for a in arrs)
    bb, bh, bl = bias_strides
    self.emit("attention", q=q, k=k, v=v, lengths=lengths, o=o, scores=scratch, bias=bias, b=B, h=H, lq=Lq, lk=Lk,
              d=D, dv=Dv, causal=int(attrs["causal"]), qb=qb, qh=qh, ql=ql, kb=kb, kh=kh, kl=kl, vb=vb, vh=vh, vl=vl,
              ob=ob, oh=oh, ol=ol, bb=bb, bh=bh, bl=bl, scale=scale, keep=[scratch])


def lower_attention(self, node, attrs):
    if attrs["return_weights"]:
        raise Unsupported("attention weights")
    q, k, v, lengths = (list(node.inputs) + [None])[:4]
    _lower_attention(self, node, attrs, q, k, v, lengths, None)


register(OpDef("attention", ("q", "k", "v", "lengths?"), _attn_infer, _attn_make,
               attrs={"causal": False, "scale": None, "return_weights": False},
               modes=lambda specs, attrs: ["out", "fresh"] if attrs["return_weights"] else ["out"],
               n_outputs=lambda attrs: 2 if attrs["return_weights"] else 1, kernel="attention", native=lower_attention,
               device=_attn_make))  # the cuda kernel reads strided q/k/v as they are


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


def lower_embedding(self, node, attrs):
    ids, table, pos = (list(node.inputs) + [None])[:3]
    (y,) = node.outputs
    ia, ta = _contig(self.arrays[ids], _I64), _contig(self.arrays[table])
    _contig(self.arrays[y])
    length = 1
    if pos is not None:
        length = _contig(self.arrays[pos]).shape[0]
    self.emit("embedding", ids=ids, table=table, positions=pos, y=y, n=ia.size, d=ta.shape[1], length=length,
              vocab=ta.shape[0], scale=attrs["scale"])


def _embedding_device(ctx):
    from seqjit.graph.device_ops import _cuda  # (numba.cuda: imported on a device only)

    from seqjit.kernels.embedding.cuda import embedding

    out, scale = ctx.outs[0] if ctx.outs else None, ctx.attrs["scale"]

    def run(ids, table, positions=None):
        # ids fed from the host carry a host copy for the range check; ids made on the device (the
        # greedy/beam tokens) are argmax indices of the logits, inside the target vocabulary
        mirror = _cuda.host_mirror(ids)
        return embedding(ids, table, scale=scale, positions=positions, out=out, host_ids=mirror,
                         check_ids=mirror is not None or not _cuda.is_device_array(ids))

    return run


register(OpDef("embedding", ("ids", "table", "positions?"), _emb_infer, _emb_make, attrs={"scale": 1.0}, kernel="embedding",
               native=lower_embedding, native_kernel=True, device=_embedding_device))


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


def lower_embedding_int8(self, node, attrs):
    ids, table, row_scale, pos = (list(node.inputs) + [None])[:4]
    (y,) = node.outputs
    ia, ta = _contig(self.arrays[ids], _I64), _contig(self.arrays[table], np.dtype(np.int8))
    _contig(self.arrays[row_scale]), _contig(self.arrays[y])
    length = 1 if pos is None else _contig(self.arrays[pos]).shape[0]
    self.emit("embedding_int8", ids=ids, table=table, positions=pos, y=y, row_scale=row_scale, n=ia.size,
              d=ta.shape[1], length=length, vocab=ta.shape[0], scale=float(np.float32(attrs["scale"])))


register(OpDef("embedding_int8", ("ids", "table", "scale", "positions?"), _emb8_infer, _emb8_make, attrs={"scale": 1.0},
               native=lower_embedding_int8))


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


def _lower_activation(self, node, code):
    (x,), (y,) = node.inputs, node.outputs
    xa = _contig(self.arrays[x])
    _contig(self.arrays[y])
    self.emit("act", x=x, y=y, n=xa.size, act=code)


def lower_relu(self, node, attrs):
    _lower_activation(self, node, act_spec.RELU)


def lower_gelu(self, node, attrs):
    _lower_activation(self, node, act_spec.GELU_TANH if attrs.get("approximate") == "tanh" else act_spec.GELU)


def lower_silu(self, node, attrs):
    _lower_activation(self, node, act_spec.SILU)


def lower_tanh(self, node, attrs):
    _lower_activation(self, node, act_spec.TANH)


_ACT_LOWERINGS = {"relu": lower_relu, "silu": lower_silu, "tanh": lower_tanh}
for _name in ("relu", "silu", "tanh"):
    register(OpDef(_name, ("x",), _act_infer(_name), _act_make(_name), kernel=_name, native=_ACT_LOWERINGS[_name],
                   native_kernel=True))
register(OpDef("gelu", ("x",), _act_infer("gelu"), _act_make("gelu"), attrs={"approximate": "none"}, kernel="gelu",
               native=lower_gelu, native_kernel=True))


# -- softmax / log_softmax over the last axis ----------------------------------------------------
def _softmax_make(name):
    def make(ctx):
        return partial(ctx.kernel(name), out=_out(ctx))

    return make


for _name in ("softmax", "log_softmax"):
    register(OpDef(_name, ("x", "mask?"), same_as(0), _softmax_make(_name), kernel=_name))
