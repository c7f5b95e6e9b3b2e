"""How each op runs on numba.cuda device arrays: the cuda counterpart of the ops' NumPy glue.

An op's meaning (inputs, attributes, shapes, output modes) stays declared once in
:mod:`seqjit.graph.ops`; a plan bound to the cuda backend asks :func:`maker` for the function of
each node instead of ``OpDef.make``:

- kernel ops (linear, attention, layer_norm, ...) bind their cuda kernel through ``OpDef.make`` as on
  the CPU (the context's backend is ``"cuda"``), with inputs that are not C-contiguous copied into a
  buffer of the node first (attention reads strided q/k/v as they are);
- layout ops (reshape, slices, heads, concat, KV-cache writes, ...) are strided views where the op is
  a view, or :mod:`seqjit.kernels.layout` kernels writing into the planned device buffer.

Scalars (``step``) stay host values: a step's position reaches the device as a launch argument.
"""
from __future__ import annotations

import numpy as np

from seqjit.errors import GraphError
from seqjit.graph.ops import get_op
from seqjit.graph.ops.layout_ops import _row_at_make, _step_index
from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as layout

#: kernel ops whose cuda kernels read strided inputs as they are
_STRIDED_OK = {"attention"}


def _buffer(ctx, k: int = 0):
    """The planned device buffer of output ``k``, or a fresh device array of its spec."""
    buf = ctx.outs[k] if ctx.outs else None
    if buf is None:
        spec = ctx.out_specs[k]
        return _cuda.device_empty(spec.shape, spec.dtype)
    return buf


def _view_or_copy(x, shape):
    """``x`` reshaped as a view where its strides allow, else copied into a fresh contiguous array."""
    try:
        return _cuda.reshape_view(x, shape)
    except ValueError:
        dense = _cuda.device_empty(tuple(x.shape), x.dtype)
        layout.copy(x, dense)
        return _cuda.reshape_view(dense, shape)


def _last_axis(x, start: int, stop: int):
    return x[(slice(None),) * (len(x.shape) - 1) + (slice(start, stop),)]


def _along(x, axis: int, start: int, stop: int):
    return x[(slice(None),) * axis + (slice(start, stop),)]


# -- kernel ops ----------------------------------------------------------------------------------
class _Contiguous:
    """Copies a strided device input into this node's own buffer (allocated on first need)."""

    def __init__(self):
        self.buffers: dict = {}

    def __call__(self, k, x):
        if x is None or not _cuda.is_device_array(x) or _cuda.is_c_contiguous(x):
            return x
        key = (k, tuple(x.shape), np.dtype(x.dtype).str)
        buf = self.buffers.get(key)
        if buf is None:
            buf = self.buffers[key] = _cuda.device_empty(tuple(x.shape), x.dtype)
        return layout.copy(x, buf)


def _embedding(ctx):
    from seqjit.kernels.embedding.cuda import embedding

    out, scale = ctx.outs[0] if ctx.outs else None, ctx.attrs["scale"]

    def run(ids, table, positions=None):
        # ids fed from the host carry a host copy for the range check; ids made on the device (the
        # greedy/beam tokens) are argmax indices of the logits, inside the target vocabulary
        mirror = _cuda.host_mirror(ids)
        return embedding(ids, table, scale=scale, positions=positions, out=out, host_ids=mirror,
                         check_ids=mirror is not None or not _cuda.is_device_array(ids))

    return run


def _recurrent(mode):
    def bind(ctx):
        fn = get_op(mode).make(ctx)
        n_states = 1 if mode == "gru" else 2

        def run(x, *rest):
            rest = list(rest)
            lengths = rest[n_states]
            if lengths is not None and _cuda.is_device_array(lengths):
                mirror = _cuda.host_mirror(lengths)
                rest[n_states] = mirror if mirror is not None else lengths.copy_to_host()
            return fn(x, *rest)

        return bind_contiguous(run)

    return bind


def bind_contiguous(fn):
    dense = _Contiguous()
    return lambda *args: fn(*[dense(k, a) for k, a in enumerate(args)])


# -- layout ops ----------------------------------------------------------------------------------
def _identity(ctx):
    return lambda x: x


def _reshape(ctx):
    shape = ctx.out_specs[0].shape
    return lambda x: _view_or_copy(x, shape)


def _split_heads(ctx):
    b, h, l, d = ctx.out_specs[0].shape
    if get_op("split_heads").output_modes(ctx.in_specs, ctx.attrs)[0] != "out":
        return lambda x: _view_or_copy(x, (b, h, l, d))
    out = _buffer(ctx)
    return lambda x: layout.copy(_cuda.permute_view(_view_or_copy(x, (b, l, h, d)), (0, 2, 1, 3)), out)


def _merge_heads(ctx):
    shape = ctx.out_specs[0].shape
    if get_op("merge_heads").output_modes(ctx.in_specs, ctx.attrs)[0] != "out":
        return lambda x: _view_or_copy(x, shape)
    out = _buffer(ctx)
    b, h, l, d = ctx.in_specs[0].shape
    target = _cuda.reshape_view(out, (b, l, h, d))
    return lambda x: (layout.copy(_cuda.permute_view(x, (0, 2, 1, 3)), target), out)[1]


def _slice_last(ctx):
    start, stop = int(ctx.attrs["start"]), int(ctx.attrs["stop"])
    return lambda x: _last_axis(x, start, stop)


def _transpose(ctx):
    axes, out = tuple(ctx.attrs["axes"]), _buffer(ctx)
    return lambda x: layout.copy(_cuda.permute_view(x, axes), out)


def _concat(ctx):
    out, axis = _buffer(ctx), int(ctx.attrs["axis"]) % len(ctx.out_specs[0].shape)

    def concat(*xs):
        start = 0
        for x in xs:
            stop = start + x.shape[axis]
            layout.copy(x, _along(out, axis, start, stop))
            start = stop
        return out

    return concat


def _stack(ctx):
    out, axis = _buffer(ctx), int(ctx.attrs["axis"]) % len(ctx.out_specs[0].shape)

    def stack(*xs):
        for k, x in enumerate(xs):
            layout.copy(x, out[(slice(None),) * axis + (k,)])
        return out

    return stack


def _add(ctx):
    out = _buffer(ctx)
    return lambda a, b: layout.add(a, b, out)


def _position_rows(ctx):
    offset, length = int(ctx.attrs["offset"]), ctx.out_specs[0].shape[0]
    return lambda table, ids: table[offset:offset + length]


def _kv_write(ctx):
    b, h, t_max, d = ctx.in_specs[0].shape

    def kv_write(cache, x, step):
        t = _step_index(step, t_max, "the decoder state's max_length")
        layout.copy(_view_or_copy(x, (b, h, 1, d)), cache[:, :, t:t + 1, :])
        return cache

    return kv_write


def _step_lengths(ctx):
    out = _buffer(ctx)
    return lambda step, like: layout.fill(out, int(step) + 1)


def _select_first_step(ctx):
    out = _buffer(ctx)
    return lambda step, first, rest: layout.copy(first if int(step) == 0 else rest, out)


_LAYOUT = {
    "identity": _identity, "reshape": _reshape, "split_heads": _split_heads, "merge_heads": _merge_heads,
    "slice_last": _slice_last, "transpose": _transpose, "concat": _concat, "stack": _stack, "add": _add,
    "position_rows": _position_rows, "position_at": _row_at_make, "kv_write": _kv_write,
    "step_lengths": _step_lengths, "select_first_step": _select_first_step,
}
_SPECIAL = {"embedding": _embedding, "gru": _recurrent("gru"), "lstm": _recurrent("lstm")}


def maker(op: str):
    """``make(ctx) -> fn`` of ``op`` on device arrays; GraphError for an op with no cuda form."""
    if op in _LAYOUT:
        return _LAYOUT[op]
    if op in _SPECIAL:
        return _SPECIAL[op]
    opdef = get_op(op)
    if opdef.kernel is None:
        raise GraphError(f"op {op!r} has no cuda implementation (it runs as NumPy glue on the CPU only)")
    if op in _STRIDED_OK:
        return opdef.make
    return lambda ctx: bind_contiguous(opdef.make(ctx))
