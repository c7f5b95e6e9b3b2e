"""Ops of the T5 family: RMS norm, the bucketed relative position bias, attention with an additive
bias, and the elementwise product of the gated FFN.

NumPy here, the readable definitions; the native replay runs each as an instruction of its own
(seqjit.graph.native_ops: the bucket table of a shape made there with :func:`relative_buckets`, the
rows by the per-instruction-set kernels of kernels/activations/native_act.h). Shapes: B batch, H heads, Lq/Lk query/key lengths, D head dim, NB buckets.

- ``rms_norm(x, weight)``: ``x / sqrt(mean(x**2) + eps) * weight`` over the last axis
  (``T5LayerNorm``: no mean subtracted, no bias).
- ``relative_bias(table [NB, H], like)``: ``[1, H, L, L]`` for the ``L = like.shape[1]`` positions of a
  whole sequence; ``relative_bias_at(table, step, cache [B, H, M, D])``: ``[1, H, 1, M]`` for the query
  at position ``step`` over the ``M`` cache positions. Entry (q, k) is ``table[bucket(k - q), h]`` with
  T5's buckets (``T5Attention._relative_position_bucket``): half exact, half logarithmic up to
  ``max_distance``, split by sign when ``bidirectional`` (the encoder), and computed in float32 as
  ``transformers`` computes them, so the boundaries fall where they fall there.
- ``biased_attention(q, k, v, bias, lengths?)``: ``softmax(q k^T * scale + bias, masked) v`` (``scale``
  None: 1/sqrt(D), as ``attention``) with keys at
  or beyond ``lengths[b]`` (and, when ``causal``, after the query) masked.
- ``mul(a, b)``: the elementwise product (with NumPy broadcasting).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from seqjit.graph.native_ops import _I64, _contig, _rows
from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, need_dtype_match, need_float, register
from seqjit.graph.ops.kernel_ops import _lower_attention


def _out(ctx, k=0):
    return ctx.outs[k] if ctx.outs else None


def relative_buckets(relative: np.ndarray, bidirectional: bool, num_buckets: int, max_distance: int) -> np.ndarray:
    """T5's bucket of each relative position ``key - query`` (int64 array in, int64 array out)."""
    buckets = np.zeros(relative.shape, np.int64)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0) * num_buckets
        distance = np.abs(relative)
    else:
        distance = -np.minimum(relative, 0)
    max_exact = num_buckets // 2
    small = distance < max_exact
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(distance.astype(np.float32) / np.float32(max_exact)) / np.float32(math.log(max_distance / max_exact))
        large = max_exact + np.where(small, 0, ratio * np.float32(num_buckets - max_exact)).astype(np.int64)
    buckets += np.where(small, distance, np.minimum(large, num_buckets - 1))
    return buckets


@lru_cache(maxsize=256)
def _bucket_grid(queries: int, keys: int, first_query: int, bidirectional: bool, num_buckets: int,
                 max_distance: int) -> np.ndarray:
    relative = np.arange(keys)[None, :] - (np.arange(queries)[:, None] + first_query)
    grid = relative_buckets(relative, bidirectional, num_buckets, max_distance)
    grid.flags.writeable = False
    return grid


def _bias_attrs():
    return {"bidirectional": REQUIRED, "max_distance": REQUIRED}


def _check_table(table, where):
    need(len(table.shape) == 2, where, f"table must be [buckets, heads], got {table}")
    need_float(table, "table", where)


def _bias_infer(specs, attrs):
    table, like = specs
    _check_table(table, "relative_bias")
    need(len(like.shape) >= 2, "relative_bias", f"like must be [B, L, ...], got {like}")
    n = like.shape[1]
    return [TensorSpec((1, table.shape[1], n, n), table.dtype)]


def _bias_make(ctx):
    bidirectional, max_distance, out = bool(ctx.attrs["bidirectional"]), int(ctx.attrs["max_distance"]), _out(ctx)

    def relative_bias(table, like):
        n = like.shape[1]
        grid = _bucket_grid(n, n, 0, bidirectional, table.shape[0], max_distance)
        dst = out if out is not None else np.empty((1, table.shape[1], n, n), table.dtype)
        np.copyto(dst[0], np.moveaxis(table[grid], -1, 0))
        return dst

    return relative_bias


def _lower_relative_bias(self, node, attrs, table, step, lq, lk, below):
    """relative_bias(_at): the bucket of every relative position in [-below, lk) computed here (in
    NumPy, as the Python op), the gather of the table's rows at run time (q0: 0, or ``step``)."""
    ta = _contig(self.arrays[table])
    (y,) = node.outputs
    _contig(self.arrays[y])
    buckets = np.ascontiguousarray(relative_buckets(np.arange(-below, lk), bool(attrs["bidirectional"]),
                                                    ta.shape[0], int(attrs["max_distance"])), dtype=np.int64)
    self.emit("relative_bias", table=table, buckets=buckets, step=step, y=y, heads=ta.shape[1], below=below, lq=lq,
              lk=lk, has_step=int(step is not None), keep=[buckets])


def lower_relative_bias(self, node, attrs):
    table, like = node.inputs
    n = self.arrays[like].shape[1]
    _lower_relative_bias(self, node, attrs, table, None, n, n, n - 1)


register(OpDef("relative_bias", ("table", "like"), _bias_infer, _bias_make, attrs=_bias_attrs(),
               native=lower_relative_bias))


def _bias_at_infer(specs, attrs):
    table, step, cache = specs
    _check_table(table, "relative_bias_at")
    need(np.dtype(step.dtype).kind in "iu" and step.shape in ((), (1,)), "relative_bias_at",
         f"step must be an integer scalar, got {step}")
    need(len(cache.shape) == 4, "relative_bias_at", f"cache must be [B, H, M, D], got {cache}")
    return [TensorSpec((1, table.shape[1], 1, cache.shape[2]), table.dtype)]


def _bias_at_make(ctx):
    bidirectional, max_distance, out = bool(ctx.attrs["bidirectional"]), int(ctx.attrs["max_distance"]), _out(ctx)

    def relative_bias_at(table, step, cache):
        m = cache.shape[2]
        grid = _bucket_grid(1, m, int(step), bidirectional, table.shape[0], max_distance)
        dst = out if out is not None else np.empty((1, table.shape[1], 1, m), table.dtype)
        np.copyto(dst[0], np.moveaxis(table[grid], -1, 0))
        return dst

    return relative_bias_at


def lower_relative_bias_at(self, node, attrs):
    table, step, cache = node.inputs
    _contig(self.arrays[step], _I64)
    m = self.arrays[cache].shape[2]
    _lower_relative_bias(self, node, attrs, table, step, 1, m, m - 1)


register(OpDef("relative_bias_at", ("table", "step", "cache"), _bias_at_infer, _bias_at_make, attrs=_bias_attrs(),
               native=lower_relative_bias_at))


def _attn_infer(specs, attrs):
    q, k, v, bias = specs[:4]
    lengths = specs[4] if len(specs) > 4 else None
    where = "biased_attention"
    for name, s in (("q", q), ("k", k), ("v", v), ("bias", bias)):
        need_float(s, name, where)
        need(len(s.shape) == 4, where, f"{name} must be 4-D, got {s}")
    need(k.shape[:3] == v.shape[:3] and q.shape[:2] == k.shape[:2] and q.shape[3] == k.shape[3], where,
         f"q {q}, k {k} and v {v} do not match")
    need(bias.shape[1:] == (q.shape[1], q.shape[2], k.shape[2]) and bias.shape[0] in (1, q.shape[0]), where,
         f"bias must be [1 or B, H, Lq, Lk] = [.., {q.shape[1]}, {q.shape[2]}, {k.shape[2]}], got {bias}")
    need(lengths is None or tuple(lengths.shape) == (q.shape[0],), where, f"lengths must be [{q.shape[0]}], got {lengths}")
    need_dtype_match([q, k, v, bias], ["q", "k", "v", "bias"], where)
    return [TensorSpec(q.shape[:3] + (v.shape[3],), q.dtype)]


def _attn_make(ctx):
    causal, scale, out = bool(ctx.attrs["causal"]), ctx.attrs["scale"], _out(ctx)

    def biased_attention(q, k, v, bias, lengths=None):
        s = np.matmul(q, np.swapaxes(k, -1, -2))
        s *= q.dtype.type(1.0 / math.sqrt(q.shape[3]) if scale is None else scale)
        s += bias
        lq, lk = s.shape[2], s.shape[3]
        masked = np.zeros((s.shape[0], 1, lq, lk), bool)
        if lengths is not None:
            masked |= (np.arange(lk)[None, :] >= np.asarray(lengths)[:, None])[:, None, None, :]
        if causal:
            masked |= (np.arange(lk)[None, :] > np.arange(lq)[:, None])[None, None]
        s = np.where(masked, -np.inf, s)
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        dst = out if out is not None else np.empty(q.shape[:3] + (v.shape[3],), q.dtype)
        np.matmul(s, v, out=dst)
        return dst

    return biased_attention


def lower_biased_attention(self, node, attrs):
    q, k, v, bias, lengths = (list(node.inputs) + [None])[:5]
    _lower_attention(self, node, attrs, q, k, v, lengths, bias)


register(OpDef("biased_attention", ("q", "k", "v", "bias", "lengths?"), _attn_infer, _attn_make,
               attrs={"causal": False, "scale": None}, native=lower_biased_attention))


def _rms_infer(specs, attrs):
    x, w = specs
    need_float(x, "x", "rms_norm")
    need(tuple(w.shape) == (x.shape[-1],), "rms_norm", f"weight must be [{x.shape[-1]}], got {w}")
    need_dtype_match([x, w], ["x", "weight"], "rms_norm")
    return [x]


def _rms_make(ctx):
    eps, out = ctx.attrs["eps"], _out(ctx)

    def rms_norm(x, weight):
        dst = out if out is not None else np.empty_like(x)
        mean_square = np.mean(np.square(x), axis=-1, keepdims=True)
        np.multiply(x, 1.0 / np.sqrt(mean_square + x.dtype.type(eps)), out=dst)
        np.multiply(dst, weight, out=dst)
        return dst

    return rms_norm


def lower_rms_norm(self, node, attrs):
    x, g = node.inputs
    (y,) = node.outputs
    m, d, ldx = _rows(self.arrays[x])
    _, _, ldy = _rows(self.arrays[y])
    _contig(self.arrays[g])
    self.emit("rms_norm", x=x, weight=g, y=y, m=m, d=d, ldx=ldx, ldy=ldy, eps=attrs["eps"])


register(OpDef("rms_norm", ("x", "weight"), _rms_infer, _rms_make, attrs={"eps": 1e-6}, native=lower_rms_norm))


def _mul_infer(specs, attrs):
    a, b = specs
    need_dtype_match([a, b], ["a", "b"], "mul")
    try:
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        need(False, "mul", f"shapes {a} and {b} do not broadcast")
    return [TensorSpec(tuple(shape), a.dtype)]


def _mul_make(ctx):
    out = _out(ctx)
    return lambda a, b: np.multiply(a, b, out=out) if out is not None else np.multiply(a, b)


def lower_mul(self, node, attrs):
    self._emit_elementwise(node, "mul")


register(OpDef("mul", ("a", "b"), _mul_infer, _mul_make, native=lower_mul))
