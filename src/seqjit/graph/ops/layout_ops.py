"""NumPy glue ops: layout changes, elementwise add, slices, position rows and the KV-cache write.

Shapes: B batch, L length, H heads, D head dim, E = H*D model dim, P positions, T cache length.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from seqjit.graph.native_ops import _F32, _I64, Unsupported, _contig
from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, need_dtype_match, register, same_as

VIEW0 = lambda specs, attrs: [("view", 0)]  # noqa: E731


def _out(ctx, k=0):
    return ctx.outs[k] if ctx.outs else None


# -- identity / reshape (views) -------------------------------------------------------------------
def _identity_device(ctx):
    return lambda x: x


register(OpDef("identity", ("x",), same_as(0), lambda ctx: lambda x: x, modes=VIEW0, device=_identity_device))


def _reshape_infer(specs, attrs):
    x, target = specs[0], list(attrs["shape"])
    shape = [x.shape[k] if d == 0 else d for k, d in enumerate(target)]
    size = int(np.prod(x.shape))
    if -1 in shape:
        rest = int(np.prod([d for d in shape if d != -1]))
        need(shape.count(-1) == 1 and rest > 0 and size % rest == 0, "reshape", f"cannot reshape {x} to {target}")
        shape[shape.index(-1)] = size // rest
    need(int(np.prod(shape)) == size, "reshape", f"cannot reshape {x} to {target}")
    return [TensorSpec(tuple(shape), x.dtype)]


def _reshape_make(ctx):
    shape = ctx.out_specs[0].shape
    return lambda x: x.reshape(shape)


def _reshape_device(ctx):
    from seqjit.graph.device_ops import view_or_copy  # (numba.cuda: imported on a device only)

    shape = ctx.out_specs[0].shape
    return lambda x: view_or_copy(x, shape)


register(OpDef("reshape", ("x",), _reshape_infer, _reshape_make, attrs={"shape": REQUIRED}, modes=VIEW0,
               device=_reshape_device))


# -- heads: [B, L, E] (or [B, E] as L=1) <-> [B, H, L, D] ------------------------------------------
def _split_infer(specs, attrs):
    x, h = specs[0], int(attrs["heads"])
    need(len(x.shape) in (2, 3), "split_heads", f"x must be [B, L, E] or [B, E], got {x}")
    e = x.shape[-1]
    need(h > 0 and e % h == 0, "split_heads", f"the last dimension {e} must divide into {h} heads")
    b, l = x.shape[0], (x.shape[1] if len(x.shape) == 3 else 1)
    return [TensorSpec((b, h, l, e // h), x.dtype)]


def _split_modes(specs, attrs):
    x = specs[0]
    return [("view", 0)] if len(x.shape) == 2 or x.shape[1] == 1 else ["out"]


def _split_make(ctx):
    b, h, l, d = ctx.out_specs[0].shape
    if _split_modes(ctx.in_specs, ctx.attrs)[0] != "out":
        return lambda x: x.reshape(b, h, l, d)
    out = _out(ctx)

    def split_heads(x):
        dst = np.empty((b, h, l, d), x.dtype) if out is None else out
        np.copyto(dst, x.reshape(b, l, h, d).transpose(0, 2, 1, 3))
        return dst

    return split_heads


def lower_split_heads(self, node, attrs):
    (x,), (y,) = node.inputs, node.outputs
    b, h, l, d = self.arrays[y].shape
    xv = self.arrays[x].reshape(b, l, h, d).transpose(0, 2, 1, 3)
    if not np.shares_memory(xv, self.arrays[x]):
        raise Unsupported("split_heads source")
    self._emit_copy(x, xv, y, self.arrays[y])


def _split_heads_device(ctx):
    from seqjit.graph.device_ops import _cuda, buffer, layout, view_or_copy  # (numba.cuda: imported on a device only)

    b, h, l, d = ctx.out_specs[0].shape
    if _split_modes(ctx.in_specs, ctx.attrs)[0] != "out":
        return lambda x: view_or_copy(x, (b, h, l, d))
    out = buffer(ctx)
    return lambda x: layout.copy(_cuda.permute_view(view_or_copy(x, (b, l, h, d)), (0, 2, 1, 3)), out)


register(OpDef("split_heads", ("x",), _split_infer, _split_make, attrs={"heads": REQUIRED}, modes=_split_modes,
               native=lower_split_heads, device=_split_heads_device))


def _merge_infer(specs, attrs):
    x = specs[0]
    need(len(x.shape) == 4, "merge_heads", f"x must be [B, H, L, D], got {x}")
    b, h, l, d = x.shape
    if attrs["squeeze_length"]:
        need(l == 1, "merge_heads", f"squeeze_length needs L == 1, got {x}")
        return [TensorSpec((b, h * d), x.dtype)]
    return [TensorSpec((b, l, h * d), x.dtype)]


def _merge_modes(specs, attrs):
    return [("view", 0)] if specs[0].shape[2] == 1 else ["out"]


def _merge_make(ctx):
    shape = ctx.out_specs[0].shape
    if _merge_modes(ctx.in_specs, ctx.attrs)[0] != "out":
        return lambda x: x.reshape(shape)
    out = _out(ctx)

    def merge_heads(x):
        dst = np.empty(shape, x.dtype) if out is None else out
        np.copyto(dst.reshape(x.shape[0], x.shape[2], x.shape[1], x.shape[3]), x.transpose(0, 2, 1, 3))
        return dst

    return merge_heads


def lower_merge_heads(self, node, attrs):
    (x,), (y,) = node.inputs, node.outputs
    xa = self.arrays[x]
    b, h, l, d = xa.shape
    yv = self.arrays[y].reshape(b, l, h, d)
    if not np.shares_memory(yv, self.arrays[y]):
        raise Unsupported("merge_heads target")
    self._emit_copy(x, xa.transpose(0, 2, 1, 3), y, yv)


def _merge_heads_device(ctx):
    from seqjit.graph.device_ops import _cuda, buffer, layout, view_or_copy  # (numba.cuda: imported on a device only)

    shape = ctx.out_specs[0].shape
    if _merge_modes(ctx.in_specs, ctx.attrs)[0] != "out":
        return lambda x: view_or_copy(x, shape)
    out = buffer(ctx)
    b, h, l, d = ctx.in_specs[0].shape
    target = _cuda.reshape_view(out, (b, l, h, d))
    return lambda x: (layout.copy(_cuda.permute_view(x, (0, 2, 1, 3)), target), out)[1]


register(OpDef("merge_heads", ("x",), _merge_infer, _merge_make, attrs={"squeeze_length": False}, modes=_merge_modes,
               native=lower_merge_heads, device=_merge_heads_device))


# -- slices, transposes, concatenation ------------------------------------------------------------
def _slice_infer(specs, attrs):
    x, start, stop = specs[0], int(attrs["start"]), int(attrs["stop"])
    need(0 <= start < stop <= x.shape[-1], "slice_last", f"[{start}:{stop}] is outside the last dimension of {x}")
    return [TensorSpec(tuple(x.shape[:-1]) + (stop - start,), x.dtype)]


def _slice_make(ctx):
    start, stop = int(ctx.attrs["start"]), int(ctx.attrs["stop"])
    return lambda x: x[..., start:stop]


def _slice_last_device(ctx):
    from seqjit.graph.device_ops import last_axis  # (numba.cuda: imported on a device only)

    start, stop = int(ctx.attrs["start"]), int(ctx.attrs["stop"])
    return lambda x: last_axis(x, start, stop)


register(OpDef("slice_last", ("x",), _slice_infer, _slice_make, attrs={"start": REQUIRED, "stop": REQUIRED}, modes=VIEW0,
               device=_slice_last_device))


def _transpose_infer(specs, attrs):
    x, axes = specs[0], tuple(attrs["axes"])
    need(sorted(axes) == list(range(len(x.shape))), "transpose", f"axes {axes} is not a permutation for {x}")
    return [TensorSpec(tuple(x.shape[a] for a in axes), x.dtype)]


def _transpose_make(ctx):
    axes, out = tuple(ctx.attrs["axes"]), _out(ctx)

    def transpose(x):
        if out is None:
            return np.ascontiguousarray(x.transpose(axes))
        np.copyto(out, x.transpose(axes))
        return out

    return transpose


def lower_transpose(self, node, attrs):
    (x,), (y,) = node.inputs, node.outputs
    self._emit_copy(x, self.arrays[x].transpose(tuple(attrs["axes"])), y, self.arrays[y])


def _transpose_device(ctx):
    from seqjit.graph.device_ops import _cuda, buffer, layout  # (numba.cuda: imported on a device only)

    axes, out = tuple(ctx.attrs["axes"]), buffer(ctx)
    return lambda x: layout.copy(_cuda.permute_view(x, axes), out)


register(OpDef("transpose", ("x",), _transpose_infer, _transpose_make, attrs={"axes": REQUIRED},
               native=lower_transpose, device=_transpose_device))


def _concat_infer(specs, attrs):
    axis, first = int(attrs["axis"]), specs[0]
    nd = len(first.shape)
    axis = axis % nd if nd else 0
    for s in specs:
        need(len(s.shape) == nd and all(a == b for k, (a, b) in enumerate(zip(s.shape, first.shape)) if k != axis),
             "concat", f"operands must match outside axis {axis}: {specs}")
    need_dtype_match(specs, [f"x{k}" for k in range(len(specs))], "concat")
    shape = list(first.shape)
    shape[axis] = sum(s.shape[axis] for s in specs)
    return [TensorSpec(tuple(shape), first.dtype)]


def _concat_make(ctx):
    axis, out = int(ctx.attrs["axis"]), _out(ctx)
    return lambda *xs: np.concatenate(xs, axis=axis, out=out)


def lower_concat(self, node, attrs):
    (y,) = node.outputs
    ya = self.arrays[y]
    axis = int(attrs["axis"]) % ya.ndim
    start = 0
    for x in node.inputs:
        xa = self.arrays[x]
        index = [slice(None)] * ya.ndim
        index[axis] = slice(start, start + xa.shape[axis])
        self._emit_copy(x, xa, y, ya[tuple(index)])
        start += xa.shape[axis]


def _concat_device(ctx):
    from seqjit.graph.device_ops import along, buffer, layout  # (numba.cuda: imported on a device only)

    out, axis = buffer(ctx), int(ctx.attrs["axis"]) % len(ctx.out_specs[0].shape)

    def concat(*xs):
        start = 0
        for x in xs:
            stop = start + x.shape[axis]
            layout.copy(x, along(out, axis, start, stop))
            start = stop
        return out

    return concat


register(OpDef("concat", ("*xs",), _concat_infer, _concat_make, attrs={"axis": REQUIRED},
               native=lower_concat, device=_concat_device))


def _stack_infer(specs, attrs):
    first = specs[0]
    need(all(s.shape == first.shape for s in specs), "stack", f"operands must share one shape: {specs}")
    need_dtype_match(specs, [f"x{k}" for k in range(len(specs))], "stack")
    axis = int(attrs["axis"]) % (len(first.shape) + 1)
    shape = list(first.shape)
    shape.insert(axis, len(specs))
    return [TensorSpec(tuple(shape), first.dtype)]


def _stack_make(ctx):
    axis, out = int(ctx.attrs["axis"]), _out(ctx)
    return lambda *xs: np.stack(xs, axis=axis, out=out)


def _stack_device(ctx):
    from seqjit.graph.device_ops import buffer, layout  # (numba.cuda: imported on a device only)

    out, axis = buffer(ctx), int(ctx.attrs["axis"]) % len(ctx.out_specs[0].shape)

    def stack(*xs):
        for k, x in enumerate(xs):
            layout.copy(x, out[(slice(None),) * axis + (k,)])
        return out

    return stack


register(OpDef("stack", ("*xs",), _stack_infer, _stack_make, attrs={"axis": REQUIRED}, device=_stack_device))


# -- elementwise add (NumPy broadcasting, no dtype promotion) -------------------------------------
def _add_infer(specs, attrs):
    a, b = specs
    need_dtype_match([a, b], ["a", "b"], "add")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        need(False, "add", f"operands do not broadcast: {a} and {b}")
    return [TensorSpec(tuple(shape), a.dtype)]


def _add_make(ctx):
    return partial(np.add, out=_out(ctx))


def lower_add(self, node, attrs):
    self._emit_elementwise(node, "add")


def _add_device(ctx):
    from seqjit.graph.device_ops import buffer, layout  # (numba.cuda: imported on a device only)

    out = buffer(ctx)
    return lambda a, b: layout.add(a, b, out)


register(OpDef("add", ("a", "b"), _add_infer, _add_make, native=lower_add, device=_add_device))


# -- positions: rows of a position table ----------------------------------------------------------
def _rows_infer(specs, attrs):
    table, ids = specs
    need(len(table.shape) == 2, "position_rows", f"table must be [P, E], got {table}")
    need(len(ids.shape) == 2, "position_rows", f"ids must be [B, L], got {ids}")
    offset, length, p = int(attrs["offset"]), ids.shape[1], table.shape[0]
    need(offset + length <= p, "position_rows",
         f"sequence length {length} exceeds the model's {p - offset} positions (max_positions)")
    return [TensorSpec((length, table.shape[1]), table.dtype)]


def _rows_make(ctx):
    offset, length = int(ctx.attrs["offset"]), ctx.out_specs[0].shape[0]
    return lambda table, ids: table[offset:offset + length]


def _position_rows_device(ctx):
    offset, length = int(ctx.attrs["offset"]), ctx.out_specs[0].shape[0]
    return lambda table, ids: table[offset:offset + length]


register(OpDef("position_rows", ("table", "ids"), _rows_infer, _rows_make, attrs={"offset": 0}, modes=VIEW0,
               device=_position_rows_device))


def _step_index(step, limit: int, what: str) -> int:
    t = int(step)
    if not 0 <= t < limit:
        raise ValueError(f"step must lie in [0, {limit}) ({what}), got {t}")
    return t


def _row_at_infer(specs, attrs):
    table, step = specs
    need(len(table.shape) == 2, "position_at", f"table must be [P, E], got {table}")
    need(np.dtype(step.dtype).kind in "iu" and step.shape in ((), (1,)), "position_at", f"step must be an integer scalar, got {step}")
    return [TensorSpec((1, table.shape[1]), table.dtype)]


def _row_at_make(ctx):
    offset, p = int(ctx.attrs["offset"]), ctx.in_specs[0].shape[0]

    def position_at(table, step):
        t = _step_index(step, p - offset, "max_positions of the model") + offset
        return table[t:t + 1]

    return position_at


def lower_position_at(self, node, attrs):
    table, step = node.inputs
    (y,) = node.outputs
    ta = _contig(self.arrays[table])
    _contig(self.arrays[step], _I64)
    self.arrays[y] = self.own(self.plan.specs[y])
    self.emit("position_at", table=table, step=step, y=self.arrays[y], d=ta.shape[1], offset=attrs["offset"],
              rows=ta.shape[0])


register(OpDef("position_at", ("table", "step"), _row_at_infer, _row_at_make, attrs={"offset": 0}, modes=VIEW0,
               native=lower_position_at, device=_row_at_make))


# -- decoder-step helpers: KV-cache write, per-row lengths ----------------------------------------
def _kv_infer(specs, attrs):
    cache, x, step = specs
    need(len(cache.shape) == 4, "kv_write", f"cache must be [B, H, T, D], got {cache}")
    b, h, _, d = cache.shape
    need(x.shape in ((b, h * d), (b, 1, h * d), (b, h, 1, d)), "kv_write", f"x must be [B, H*D] for cache {cache}, got {x}")
    need(np.dtype(step.dtype).kind in "iu" and step.shape in ((), (1,)), "kv_write", f"step must be an integer scalar, got {step}")
    need_dtype_match([cache, x], ["cache", "x"], "kv_write")
    return [cache]


def _kv_make(ctx):
    b, h, t_max, d = ctx.in_specs[0].shape

    def kv_write(cache, x, step):
        t = _step_index(step, t_max, "the decoder state's max_length")
        cache[:, :, t, :] = x.reshape(b, h, d)
        return cache

    return kv_write


def lower_kv_write(self, node, attrs):
    cache, x, step = node.inputs
    ca = _contig(self.arrays[cache])
    b, h, t, d = ca.shape
    xv = self.arrays[x].view()
    try:
        xv.shape = (b, h, d)
    except AttributeError:
        raise Unsupported("kv_write source layout") from None
    if xv.dtype != _F32 or (d > 1 and xv.strides[2] != 4):
        raise Unsupported("kv_write source layout")
    _contig(self.arrays[step], _I64)
    self.emit("kv_write", cache=cache, x=x, step=step, b=b, h=h, t=t, d=d, x_sb=xv.strides[0] // 4,
              x_sh=xv.strides[1] // 4)


def _kv_write_device(ctx):
    from seqjit.graph.device_ops import layout, view_or_copy  # (numba.cuda: imported on a device only)

    b, h, t_max, d = ctx.in_specs[0].shape

    def kv_write(cache, x, step):
        t = _step_index(step, t_max, "the decoder state's max_length")
        layout.copy(view_or_copy(x, (b, h, 1, d)), cache[:, :, t:t + 1, :])
        return cache

    return kv_write


register(OpDef("kv_write", ("cache", "x", "step"), _kv_infer, _kv_make, modes=lambda specs, attrs: [("inplace", 0)],
               pure=False, native=lower_kv_write, device=_kv_write_device))


def _lengths_infer(specs, attrs):
    step, like = specs
    need(np.dtype(step.dtype).kind in "iu" and step.shape in ((), (1,)), "step_lengths", f"step must be an integer scalar, got {step}")
    return [TensorSpec((like.shape[0],), np.dtype(np.int64))]


def _lengths_make(ctx):
    out, shape = _out(ctx), ctx.out_specs[0].shape

    def step_lengths(step, like):
        dst = np.empty(shape, np.int64) if out is None else out
        dst.fill(int(step) + 1)
        return dst

    return step_lengths


def lower_step_lengths(self, node, attrs):
    step, _ = node.inputs
    (y,) = node.outputs
    _contig(self.arrays[step], _I64)
    self.emit("step_lengths", step=step, y=y, n=_contig(self.arrays[y], _I64).size)


def _step_lengths_device(ctx):
    from seqjit.graph.device_ops import buffer, layout  # (numba.cuda: imported on a device only)

    out = buffer(ctx)
    return lambda step, like: layout.fill(out, int(step) + 1)


register(OpDef("step_lengths", ("step", "like"), _lengths_infer, _lengths_make,
               native=lower_step_lengths, device=_step_lengths_device))
