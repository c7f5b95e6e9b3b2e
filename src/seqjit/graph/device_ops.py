"""What the ops' device forms share, on numba.cuda device arrays (the cuda counterpart of the ops'
NumPy glue); imported only once a device is in use (it imports numba.cuda).

An op's meaning stays declared once in :mod:`seqjit.graph.ops`; a plan bound to the cuda backend asks
:func:`maker` for the function of each node instead of ``OpDef.make``:

- ``OpDef.device``, where the op declares one beside its ``register(OpDef(...))``: layout ops
  (reshape, slices, heads, concat, KV-cache writes, ...) as strided views where the op is a view, or
  :mod:`seqjit.kernels.layout` kernels writing into the planned device buffer, and the ops whose
  device form differs (embedding's host-mirrored range check, the recurrences' host lengths);
- otherwise a kernel op binds its cuda kernel through ``OpDef.make`` as on the CPU (the context's
  backend is ``"cuda"``), with inputs that are not C-contiguous copied into a buffer of the node
  first.

Scalars (``step``) stay host values: a step's position reaches the device as a launch argument.
"""
from __future__ import annotations

import numpy as np

from seqjit.errors import GraphError
from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as layout


def buffer(ctx, k: int = 0):
    """The planned device buffer of output ``k``, or a fresh device array of its spec."""
    buf = ctx.outs[k] if ctx.outs else None
    if buf is None:
        spec = ctx.out_specs[k]
        return _cuda.device_empty(spec.shape, spec.dtype)
    return buf


def view_or_copy(x, shape):
    """``x`` reshaped as a view where its strides allow, else copied into a fresh contiguous array."""
    try:
        return _cuda.reshape_view(x, shape)
    except ValueError:
        dense = _cuda.device_empty(tuple(x.shape), x.dtype)
        layout.copy(x, dense)
        return _cuda.reshape_view(dense, shape)


def last_axis(x, start: int, stop: int):
    return x[(slice(None),) * (len(x.shape) - 1) + (slice(start, stop),)]


def along(x, axis: int, start: int, stop: int):
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


def bind_contiguous(fn):
    dense = _Contiguous()
    return lambda *args: fn(*[dense(k, a) for k, a in enumerate(args)])


def maker(opdef):
    """``make(ctx) -> fn`` of op ``opdef`` on device arrays; GraphError for an op with no cuda form."""
    if opdef.device is not None:
        return opdef.device
    if opdef.kernel is None:
        raise GraphError(f"op {opdef.name!r} has no cuda implementation (it runs as NumPy glue on the CPU only)")
    return lambda ctx: bind_contiguous(opdef.make(ctx))
