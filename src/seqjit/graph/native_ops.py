"""What the ops' native lowerings share: the opcode table, the checks that turn an operand into
rows, strides and pointers (raising :class:`Unsupported` for a layout a kernel does not take: the
node then runs as a Python callback), the thread and packing thresholds, and the services of
:class:`OpLowerings` (packed weights, element-wise and copy instructions, row gathers), mixed into
:class:`seqjit.graph.lowering.Lowering`. Each op's own lowering is ``OpDef.native``, written beside
the op in :mod:`seqjit.graph.ops`. Strides are in elements; the last axis of every float operand is
contiguous.
"""
from __future__ import annotations

import threading

import numpy as np


from seqjit.graph import kernel_choice
from seqjit.graph.derived import derived
from seqjit.graph.opcodes import OP, OPERANDS  # noqa: F401 (the opcode numbers the lowerings emit)
from seqjit.kernels.activations import spec as act_spec
from seqjit.kernels.linear.packed import pack_panels

#: a node of at least this many multiply-adds may use the run's threads; smaller ones run on the
#: calling thread: waking a sleeping OpenMP worker costs tens of microseconds, far more when its core
#: is busy with another process, so only products much longer than that pay.
PARALLEL_MACS = 1 << 24
#: the RNN products of more than 2 rows run on their weights packed in panels, as the linear's;
#: weights up to this size get a packed copy, shared by the graph's plans
BATCH_PACK_MAX_BYTES = 16 << 20
#: a linear of more than 2 rows runs on its weight packed in panels (kernels/linear/packed.py: read
#: once per product, in order; at 3-4 rows, beam 4 of one source, it beats the dot-product GEMV too); weights up to this size (a 58k-word output projection of width
#: 512 is 119 MB) get a packed copy, made when the first such plan is lowered, shared by the
#: graph's plans
PACK_MAX_BYTES = 512 << 20
#: the ``layout`` operand of a native linear (kernels/linear/_native.pxi: LAYOUT_*)
LAYOUT_IN_OUT, LAYOUT_OUT_IN, LAYOUT_PACKED = 0, 1, 2
_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_ACT = {None: act_spec.NONE, "relu": act_spec.RELU, "gelu": act_spec.GELU, "gelu_tanh": act_spec.GELU_TANH,
        "silu": act_spec.SILU, "tanh": act_spec.TANH}


#: a node of at least this many multiply-adds (and fewer than PARALLEL_MACS) is split in two column
#: halves over the team of two (kernels/_runtime/native_team.h) when a run has 2 threads: a handoff
#: costs less than half of the smallest such product
TEAM_MACS = 1 << 14


def _threads(macs: int, step_macs: int | None = None) -> int:
    """An instruction's ``threads``: 0 (the run's threads) from PARALLEL_MACS, 2 (the team) from
    TEAM_MACS per product (``step_macs``: a sequence's per-step product), else 1."""
    if macs >= PARALLEL_MACS:
        return 0
    return 2 if (macs if step_macs is None else step_macs) >= TEAM_MACS else 1


_PACK_LOCK = threading.Lock()


def _finite(w: np.ndarray) -> bool:
    """Whether every value of weight ``w`` is finite (remembered per array: a model's weights)."""
    return bool(derived([w], "all_finite", lambda: np.array(np.isfinite(w).all())))


class Unsupported(Exception):
    """This node (or plan) has no native form; the caller falls back."""


class OperandError(TypeError):
    """A lowering emitted an instruction whose operands are not its opcode's declaration
    (:data:`seqjit.graph.opcodes.OPERANDS`): a bug in the lowering, raised at lowering time (never
    a fallback). The message names the opcode and the operands missing, extra or misnamed."""


def operand_lists(op: str, named: dict) -> tuple:
    """``(pointers, integers, floats)``: the values of ``named`` (operand name -> value) in the order
    opcode ``op`` declares them; raises :class:`OperandError` for an unknown opcode or when the
    names are not exactly the declared ones."""
    decl = OPERANDS.get(op)
    if decl is None:
        raise OperandError(f"no opcode {op!r} (seqjit.graph.opcodes.OPCODES)")
    declared = [name for group in decl for name in group]
    missing = [name for name in declared if name not in named]
    extra = [name for name in named if name not in declared]
    if missing or extra:
        said = [f"missing {', '.join(missing)}"] if missing else []
        said += [f"not declared {', '.join(extra)}"] if extra else []
        declared = "; ".join(f"{kind} {', '.join(names) or '-'}"
                             for kind, names in zip(("pointers", "integers", "floats"), decl))
        raise OperandError(f"opcode {op!r}: operands {'; '.join(said)} (declared: {declared})")
    return tuple([named[name] for name in group] for group in decl)


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _rows(a: np.ndarray):
    """``a`` as rows of its last axis: (M, K, row stride in elements); the last axis contiguous and
    the rows equally spaced (a view, never a copy)."""
    if a.dtype != _F32 or (a.ndim and a.strides[-1] != 4 and a.shape[-1] > 1):
        raise Unsupported("rows")
    k = a.shape[-1] if a.ndim else 1
    v = a.view()
    try:
        v.shape = (-1, k)
    except AttributeError:
        raise Unsupported("rows are not equally spaced") from None
    ld = v.strides[0] // 4 if v.shape[0] > 1 else k
    return v.shape[0], k, ld


def _contig(a: np.ndarray, dtype=_F32) -> np.ndarray:
    if a.dtype != dtype or not a.flags.c_contiguous:
        raise Unsupported("needs a C-contiguous array")
    return a


def _strides4(shape, strides, itemsize):
    pad = 4 - len(shape)
    if pad < 0:
        raise Unsupported("copy of more than 4 dimensions")
    return [1] * pad + list(shape), [0] * pad + [s // itemsize for s in strides]


class OpLowerings:
    """The services the ops' lowerings call on :class:`~seqjit.graph.lowering.Lowering` (``self``)."""

    def _batch_layout(self, rows, *weights, derived=()):
        """The weights (value names, "out_in") as the RNN products should read them for ``rows``
        rows, and their LAYOUT_*: as stored (the dot-product GEMV), or packed in panels (where
        kernel_choice picks packed for every weight's shape; constants, or ``derived`` arrays made at
        lowering, up to BATCH_PACK_MAX_BYTES; a computed weight is read where it is)."""
        if any(self.arrays[w].nbytes > BATCH_PACK_MAX_BYTES or (w not in self.plan.graph.constants and w not in derived)
               or kernel_choice.choose(rows, *self.arrays[w].shape[::-1]) != "packed" for w in weights):
            return list(weights), LAYOUT_OUT_IN
        return [self._packed(w, _contig(self.arrays[w]), "out_in") for w in weights], LAYOUT_PACKED

    def _packed(self, name, w, layout):
        """``w`` in panels (kernels/linear/packed.py), made once per graph and shared by its plans
        (plans lowered at the same time in two threads get the same array; each program keeps it
        alive)."""
        with _PACK_LOCK:
            cache = self.plan.graph.__dict__.setdefault("_native_packed", {})
            wp = cache.get(name)
            if wp is None:
                wp = cache[name] = pack_panels(w, layout)
        return wp

    def _emit_elementwise(self, node, op: str):
        """``y = a <op> b`` over same-shaped contiguous arrays (no broadcasting)."""
        a, b = node.inputs
        (y,) = node.outputs
        arrs = [self.arrays[a], self.arrays[b], self.arrays[y]]
        if len({x.shape for x in arrs}) != 1:
            raise Unsupported(f"broadcasting {op}")
        for x in arrs:
            _contig(x)
        self.emit(op, a=a, b=b, y=y, n=arrs[2].size)

    def _emit_copy(self, src_name, src_view, dst_name, dst_view):
        """A strided copy of ``src_view`` (a view of value ``src_name``'s array) into ``dst_view``
        (a view of ``dst_name``'s)."""
        if (src_view.shape != dst_view.shape or src_view.dtype != dst_view.dtype
                or src_view.dtype.itemsize not in (4, 8)):
            raise Unsupported("copy")
        shape, ss = _strides4(src_view.shape, src_view.strides, src_view.itemsize)
        _, ds = _strides4(dst_view.shape, dst_view.strides, dst_view.itemsize)
        patches = []
        sp = _addr(src_view)
        if src_name in self.origin:
            slot, _ = self.origin[src_name]
            patches.append((OPERANDS["copy"][0].index("src"), slot, sp - _addr(self.current[slot])))
        if dst_name in self.origin:
            raise Unsupported("copy into a graph input")
        ptrs, ints, floats = operand_lists("copy", copy_operands(sp, _addr(dst_view), shape, ss, ds, src_view.itemsize))
        self.prog.add(OP["copy"], ptrs, ints, floats, 1, patches, ())

    def _gather(self, ids, table, out):
        """out[r] = table[ids[r]] (ids bounds-checked at run time, like the embedding's)."""
        self.emit("embedding", ids=ids, table=table, positions=None, y=out, n=out.shape[0], d=table.shape[1],
                  length=1, vocab=table.shape[0], scale=1.0)


def copy_operands(src: int, dst: int, shape, src_strides, dst_strides, itemsize: int) -> dict:
    """The named operands of a strided copy (``OP_COPY``) of ``shape`` (4 axes, padded in front)
    from address ``src`` to ``dst``, strides in elements."""
    named = {"src": src, "dst": dst, "itemsize": itemsize}
    for k in range(4):
        named[f"shape{k}"], named[f"src_stride{k}"], named[f"dst_stride{k}"] = shape[k], src_strides[k], dst_strides[k]
    return named
