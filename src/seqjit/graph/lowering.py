"""Lower a :class:`~seqjit.graph.executor.Plan` to a native program (:mod:`seqjit.graph._native_vm`).

Every value gets a concrete array at lowering: graph inputs are the arrays of the first run (later
runs patch the pointers that read them when an input moves), constants are themselves, planned
values are the plan's slab views, ``fresh`` outputs get an array of their own, and view ops
(reshape, slices, heads) are applied once, to those arrays. Each other node becomes one instruction
whose pointers, shapes and strides are fixed here; a node without a native kernel (or with a
layout the kernel does not take) becomes a Python callback instruction, so every plan lowers.

The native kernels compute float32; a plan holding any other float dtype is not lowered.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph.input_fold import find_folds
from seqjit.graph.native_ops import (OP, OPERANDS, OperandError, OpLowerings, Unsupported, _addr,  # noqa: F401
                                     copy_operands, operand_lists)  # (OP, OperandError, Unsupported re-exported)
from seqjit.graph.ops import OPS

_F32 = np.dtype(np.float32)


class _Made:
    """The Python function of node ``k`` of a plan, made when first called (a node lowered to a
    native kernel never makes it)."""

    __slots__ = ("fns", "k")

    def __init__(self, fns, k: int):
        self.fns, self.k = fns, k

    def __call__(self, *args):
        return self.fns[self.k](*args)


class Lowering(OpLowerings):
    """Builds the program of one plan; see the module docstring."""

    def __init__(self, plan, feeds: dict):
        from seqjit.graph._native_vm import Program

        self.plan = plan
        self.inputs = list(plan.graph.inputs)
        self.prog = Program(len(self.inputs))
        self.arrays: dict = {}
        self.origin: dict = {}  # value -> (input slot, derive(root array) -> array)
        # inputs as every run binds them: C-contiguous (a strided feed, e.g. a column of a token
        # history, would otherwise send its node to a Python callback for good)
        feeds = {n: np.ascontiguousarray(feeds[n]) for n in self.inputs}
        for s, name in enumerate(self.inputs):
            self.arrays[name] = feeds[name]
            self.origin[name] = (s, _identity)
        self.arrays.update(plan.graph.constants)
        self.current: list = [feeds[n] for n in self.inputs]  # the arrays of the run in progress
        #: (node name, op, "native" or "python") of each instruction, for the profiler
        self.labels: list = []
        #: recurrent cells whose input projection is a gather from a projected-embedding table, and
        #: the nodes that then need not run (seqjit.graph.input_fold)
        self.folds = find_folds(plan)
        self.skipped = {name for f in self.folds.values() for name in f.dead}
        for k, (node, attrs, modes) in enumerate(zip(plan.nodes, plan.attrs, plan.modes)):
            before = len(self.prog)
            self._lower(node, attrs, modes, _Made(plan.fns, k))
            kind = "python" if self._called_back else "native"
            self.labels.extend([(node.name, node.op, kind)] * (len(self.prog) - before))
        self.prog.finish([_addr(feeds[n]) for n in self.inputs])

    # -- operands ----------------------------------------------------------------------------------
    def now(self, name):
        """The array of ``name`` in the run in progress (values derived from inputs re-derived)."""
        if name is None:
            return None
        o = self.origin.get(name)
        if o is None:
            return self.arrays[name]
        slot, derive = o
        return derive(self.current[slot])

    def _ptrs(self, names_or_arrays):
        """Addresses and input patches of the operands (a value name, an array we own, or None)."""
        ptrs, patches = [], []
        for k, item in enumerate(names_or_arrays):
            if item is None:
                ptrs.append(0)
                continue
            arr = self.arrays[item] if isinstance(item, str) else item
            ptrs.append(_addr(arr))
            if isinstance(item, str) and item in self.origin:
                slot, _ = self.origin[item]
                patches.append((k, slot, _addr(arr) - _addr(self.current[slot])))
        return ptrs, patches

    def emit(self, op, *, threads=1, keep=(), **operands):
        """One instruction of opcode ``op``, its operands by the names ``seqjit.graph.opcodes.OPERANDS``
        declares (:class:`OperandError` for a missing, extra or misnamed one): a pointer is a value
        name, an array we own, or None (NULL); integers and floats are numbers. The program keeps
        every array operand alive (a transposed weight, a scratch buffer), so no pointer it holds can
        dangle."""
        pointers, ints, floats = operand_lists(op, operands)
        ptrs, patches = self._ptrs(pointers)
        arrays = [a for a in pointers if isinstance(a, np.ndarray)]
        self.prog.add(OP[op], ptrs, [int(i) for i in ints], [float(f) for f in floats], threads, patches,
                      list(keep) + arrays)

    def own(self, spec) -> np.ndarray:
        return np.zeros(spec.shape, spec.dtype)

    # -- nodes -------------------------------------------------------------------------------------
    def _lower(self, node, attrs, modes, fn):
        self._called_back = False
        plan = self.plan
        if node.name in self.skipped:
            for out in node.outputs:
                self.arrays[out] = self.own(plan.specs[out])
            return
        outs = []
        for out, mode in zip(node.outputs, modes):
            if mode == "out":
                arr = plan.memory.views.get(plan._root[out])
                outs.append(arr if arr is not None else self.own(plan.specs[out]))
            elif mode == "fresh":
                outs.append(self.own(plan.specs[out]))
            elif mode[0] == "inplace":
                outs.append(self.arrays[node.inputs[mode[1]]])
                if node.inputs[mode[1]] in self.origin:
                    self.origin[out] = self.origin[node.inputs[mode[1]]]
            else:
                outs.append(None)  # a view: made below
        if all(isinstance(m, tuple) and m[0] == "view" for m in modes) and node.op != "position_at":
            self._view(node, fn)
            return
        for out, arr in zip(node.outputs, outs):
            self.arrays[out] = arr
        handler = OPS[node.op].native
        try:
            if handler is None:
                raise Unsupported(node.op)
            handler(self, node, attrs)
        except Unsupported:
            self._callback(node, fn, modes)

    def _view(self, node, fn):
        src = node.inputs[0]
        args = [self.arrays[i] if i is not None else None for i in node.inputs]
        view = fn(*args)
        out = node.outputs[0]
        if not np.shares_memory(view, args[0]):  # the view op had to copy: materialise it each run
            self.arrays[out] = self.own(self.plan.specs[out])
            self._callback(node, fn, ["out"])
            return
        self.arrays[out] = view
        if src in self.origin:
            slot, derive = self.origin[src]
            rest = node.inputs[1:]
            self.origin[out] = (slot, lambda root, d=derive, f=fn, r=rest: f(d(root), *[self.now(i) for i in r]))

    def _callback(self, node, fn, modes):
        outs = [self.arrays[o] for o in node.outputs]
        names = list(node.inputs)

        def call():
            res = fn(*[self.now(i) for i in names])
            if len(outs) == 1:
                res = (res,)
            for arr, r in zip(outs, res):
                if arr is not r:
                    np.copyto(arr, r)

        for out, mode in zip(node.outputs, modes):
            if isinstance(mode, tuple) and mode[0] == "inplace" and node.inputs[mode[1]] in self.origin:
                raise Unsupported("in-place update of an input through Python")
        self._called_back = True
        self.prog.add_callback(call)

def _identity(a):
    return a


class NativeReplay:
    """A lowered plan: ``run(feeds)`` -> outputs, like :meth:`Plan.run`."""

    def __init__(self, plan, feeds: dict):
        for spec in plan.specs.values():
            if np.dtype(spec.dtype).kind == "f" and np.dtype(spec.dtype) != _F32:
                raise Unsupported("float64 plan")
        self.low = Lowering(plan, feeds)
        self.program = self.low.prog
        self.inputs = self.low.inputs
        self.outputs = list(plan.graph.outputs)

    def bind(self, feeds: dict) -> tuple:
        arrays = tuple(feeds[n] if feeds[n].flags.c_contiguous else np.ascontiguousarray(feeds[n]) for n in self.inputs)
        self.low.current[:] = arrays
        self.program.set_inputs(arrays)
        return arrays

    def output(self, name: str) -> np.ndarray:
        return self.low.now(name)

    def copy_back_program(self, pairs):
        """A program copying output ``src`` into graph input ``dst`` for each (src, dst) pair whose
        output lives in planned memory (the recurrent state after a step back into the state the
        next step reads); inputs are patched like the plan's (``set_inputs`` with the same
        arrays). Made once and kept."""
        key = tuple(pairs)
        cached = self.__dict__.setdefault("_copy_back", {})
        if key in cached:
            return cached[key]
        from seqjit.graph._native_vm import Program

        prog = Program(len(self.inputs))
        for src, dst in pairs:
            if src in self.low.origin:
                continue  # updated in place (a KV cache): nothing to copy
            arr, slot = self.low.arrays[src], self.inputs.index(dst)
            if not arr.flags.c_contiguous or arr.dtype.itemsize not in (4, 8):
                raise Unsupported("state copy")
            named = copy_operands(_addr(arr), _addr(self.low.current[slot]), (1, 1, 1, arr.size), (0, 0, 0, 1),
                                  (0, 0, 0, 1), arr.itemsize)
            ptrs, ints, floats = operand_lists("copy", named)
            prog.add(OP["copy"], ptrs, ints, floats, 1, [(OPERANDS["copy"][0].index("dst"), slot, 0)], [arr])
        prog.finish([_addr(a) for a in self.low.current])
        cached[key] = prog
        return prog

    def run(self, feeds: dict, *, copy: bool = True, nthreads: int = 1) -> dict:
        self.bind(feeds)
        self.program.run(nthreads)
        return self._outputs(copy)

    def run_timed(self, feeds: dict, *, copy: bool = True, nthreads: int = 1):
        """``(outputs, records)``: records are (node, op, backend, seconds) per node, for the
        profiler; the backend is "native", "python" for a node run as a callback, or "view" for a
        node that is only a view (no instruction, no time)."""
        self.bind(feeds)
        times = self.program.run_timed(nthreads)
        per_node = {n.name: [n.name, n.op, "view", 0.0] for n in self.low.plan.nodes}  # views: no instruction
        for (name, op, kind), t in zip(self.low.labels, times):
            rec = per_node[name]
            rec[2] = kind
            rec[3] += t
        return self._outputs(copy), [tuple(r) for r in per_node.values()]

    def _outputs(self, copy: bool) -> dict:
        result = {}
        for name in self.outputs:
            arr = self.low.now(name)
            result[name] = arr.copy() if (copy and name not in self.low.origin) else arr
        return result
