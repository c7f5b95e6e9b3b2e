"""Op definitions: each op's meaning is declared once, here and in the modules it imports.

An :class:`OpDef` says, for one op name:

- ``inputs``: operand names (a trailing ``?`` marks an optional operand, given as ``None``; a leading
  ``*`` marks a variadic operand list);
- ``attrs``: attribute names with their defaults (:data:`REQUIRED` for none);
- ``infer(specs, attrs) -> [TensorSpec]``: output shapes and dtypes from input shapes and dtypes;
- ``modes(specs, attrs) -> [mode]``: how each output's memory relates to the inputs:
  ``"out"`` (written into a buffer the executor plans, or a fresh array when given none),
  ``("view", k)`` (a view of input ``k``), ``("inplace", k)`` (input ``k`` updated in place and
  returned) or ``"fresh"`` (a new array the executor does not plan);
- ``make(ctx) -> fn``: a callable ``fn(*inputs)`` returning the output (a tuple when several),
  with its output buffers and kernel already bound. ``ctx`` is a :class:`BindContext`;
- ``native(lowering, node, attrs)``: the op's native lowering, if it has one: emits the op's
  instructions for the replay VM (a method of :class:`seqjit.graph.lowering.Lowering`, written
  beside the op; the helpers it uses are in :mod:`seqjit.graph.native_ops`). None, or raising
  ``Unsupported``: the VM calls ``make``'s function back;
- ``device(ctx) -> fn``: the op's function on numba.cuda device arrays, where it is not ``make``'s
  (layout ops, ops that read host mirrors); None: ``make`` with the ``cuda`` backend
  (:mod:`seqjit.graph.device_ops`);
- ``native_kernel``: the native lowering is the kernel itself (same operands, one instruction), so
  ``seqjit.kernels.get(kernel, "native")`` runs it and the op-test harness tests it as a kernel.

Kernel ops bind to ``seqjit.kernels.get(kernel, backend)``; kernels only compute. Layout ops
(reshape, heads, slices, KV-cache writes...) are tiny NumPy glue.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, NamedTuple

import numpy as np

from seqjit.errors import GraphError, ShapeError

REQUIRED = object()


@lru_cache(maxsize=4096)
def _spec_repr(shape, dtype) -> str:
    # shape inference formats specs into its messages eagerly: cache the text
    return f"{np.dtype(dtype).name}{list(shape)}"


class TensorSpec(NamedTuple):
    """Static shape (tuple of ints) and dtype of one value."""

    shape: tuple
    dtype: np.dtype

    def __repr__(self) -> str:
        return _spec_repr(self.shape, self.dtype)


@dataclass
class BindContext:
    """What ``OpDef.make`` receives: the node's attrs, input/output specs, output buffers (an array
    per ``"out"`` output the executor planned, else None) and the backend to bind kernels on."""

    attrs: dict
    in_specs: list
    out_specs: list
    outs: list
    backend: str | None = None
    node_name: str = ""

    def kernel(self, name: str):
        from seqjit import kernels

        return kernels.get(name, self.backend)


@dataclass
class OpDef:
    name: str
    inputs: tuple
    infer: Callable
    make: Callable
    attrs: dict = field(default_factory=dict)
    modes: Callable | None = None  # None: every output is "out"
    kernel: str | None = None  # the seqjit.kernels op bound by make (None for NumPy glue)
    n_outputs: Callable | int = 1
    pure: bool = True  # False: updates an input in place (never folded or removed by passes)
    native: Callable | None = None  # native(lowering, node, attrs): emits the op's VM instructions
    device: Callable | None = None  # device(ctx) -> fn on device arrays (None: make, backend "cuda")
    # True: ``native`` runs ``kernel`` as one instruction taking the kernel's operands, so the native
    # replay's kernel is the ``native`` backend of seqjit.kernels (seqjit.graph.native_backend)
    native_kernel: bool = False

    def output_count(self, attrs: dict) -> int:
        return self.n_outputs(attrs) if callable(self.n_outputs) else self.n_outputs

    def output_modes(self, specs, attrs) -> list:
        if self.modes is None:
            return ["out"] * self.output_count(attrs)
        return list(self.modes(specs, attrs))

    def full_attrs(self, attrs: dict, where: str) -> dict:
        """``attrs`` with defaults filled in; unknown or missing attributes raise GraphError."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise GraphError(f"{where}: op {self.name!r} has no attribute(s) {sorted(unknown)}; known: {sorted(self.attrs)}")
        full = {}
        for key, default in self.attrs.items():
            if key in attrs:
                full[key] = attrs[key]
            elif default is REQUIRED:
                raise GraphError(f"{where}: op {self.name!r} needs attribute {key!r}")
            else:
                full[key] = default
        return full

    def check_arity(self, n: int, where: str) -> None:
        variadic = any(i.startswith("*") for i in self.inputs)
        required = sum(1 for i in self.inputs if not i.endswith("?") and not i.startswith("*"))
        most = None if variadic else len(self.inputs)
        if n < required or (most is not None and n > most):
            raise GraphError(f"{where}: op {self.name!r} takes operands ({', '.join(self.inputs)}), got {n}")


OPS: dict = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in OPS:
        raise ValueError(f"op {opdef.name!r} registered twice")
    OPS[opdef.name] = opdef
    return opdef


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


# -- helpers shared by the op modules -------------------------------------------------------------
def same_as(k: int = 0):
    """``infer`` for ops whose single output has input ``k``'s shape and dtype."""
    return lambda specs, attrs: [specs[k]]


def need(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise ShapeError(f"{where}: {message}")


def need_float(spec, what: str, where: str) -> None:
    need(spec is not None and np.dtype(spec.dtype).kind == "f", where, f"{what} must be a float array, got {spec}")


def need_dtype_match(specs, names, where: str) -> None:
    dts = [(n, s.dtype) for n, s in zip(names, specs) if s is not None]
    if dts and any(d != dts[0][1] for _, d in dts) and len({np.dtype(d) for _, d in dts}) > 1:
        listing = ", ".join(f"{n}: {np.dtype(d).name}" for n, d in dts)
        raise ShapeError(f"{where}: operands must share one dtype, got {listing}")


def buffer(ctx: BindContext, k: int = 0):
    """Output buffer ``k`` (planned), or a fresh array of its spec when none was planned."""
    buf = ctx.outs[k] if ctx.outs else None
    if buf is None:
        spec = ctx.out_specs[k]
        return np.empty(spec.shape, spec.dtype)
    return buf


from seqjit.graph.ops import kernel_ops, layout_ops  # noqa: E402,F401  (registers the ops)
from seqjit.graph.ops import rnn_ops  # noqa: E402,F401  (gru/lstm/cells/additive_attention)
from seqjit.graph.ops import rnn_int8_ops  # noqa: E402,F401  (gru/lstm_recurrence_int8)
from seqjit.graph.ops import position_ops  # noqa: E402,F401  (fairseq_positions, padded_positions)
from seqjit.graph.ops import t5_ops  # noqa: E402,F401  (rms_norm, relative_bias, biased_attention, mul)
from seqjit.graph.ops import half_ops  # noqa: E402,F401  (linear_half, embedding_half: 16-bit weights)

__all__ = ["OPS", "OpDef", "TensorSpec", "BindContext", "REQUIRED", "register", "get_op"]
