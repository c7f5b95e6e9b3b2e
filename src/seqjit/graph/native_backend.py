"""The native kernels as a backend of :mod:`seqjit.kernels` (``kernels.get(op, backend="native")``).

The native kernels (each family's ``_native.pxi`` and C headers) run only inside the replay VM, as
instructions of a lowered plan. So that they are tested as kernels, against the NumPy reference, like
the ``numba``, ``cython`` and ``cuda`` backends (``tests/kernels/test_backend_ops.py``), each op here
takes the kernel's signature, builds a one-node graph of the op that binds that kernel (the operand
after the first as constants, as a model's weights are), lowers it and runs it natively. A node the
VM would run through a Python callback (``OP_PYCALL``: the arguments have no native form) raises
:class:`~seqjit.errors.KernelUnavailable` instead of running another backend's kernel under this
name. One graph and one lowering per call: a checking backend, not a fast path.

The kernel registry finds this module by name (``seqjit.kernels.BACKENDS``), as a model finds a
device's runtime: the kernels layer imports nothing of the graph.
"""
from __future__ import annotations

import numpy as np

from seqjit.errors import KernelUnavailable

from .executor import Executor
from .ir import GraphBuilder
from .ops import OPS

#: the kernel ops that have a native kernel of the same meaning (their graph op lowers to one
#: instruction of the kernel's operands): declared on the op (``OpDef.native_kernel``)
NATIVE_OPS = tuple(op.kernel for op in OPS.values() if op.native_kernel)


def _opdef(kernel: str):
    return next(op for op in OPS.values() if op.kernel == kernel)


def _native_kernel(kernel: str):
    opdef = _opdef(kernel)
    operands = [name.strip("?*") for name in opdef.inputs]

    def run(*args, out=None, **kwargs):
        values = dict(zip(operands, args))
        for name in operands:
            if name in kwargs:
                values[name] = kwargs.pop(name)
        unknown = set(kwargs) - set(opdef.attrs)
        if unknown:
            raise TypeError(f"{kernel}() got unexpected keyword argument(s) {sorted(unknown)}")
        first = np.asarray(values[operands[0]])
        g = GraphBuilder(f"native {kernel}")
        inputs = [g.input(operands[0], dtype="int" if first.dtype.kind in "iu" else "float")]
        for name in operands[1:]:
            value = values.get(name)
            inputs.append(None if value is None else g.constant(name, np.asarray(value)))
        while inputs and inputs[-1] is None:
            inputs.pop()
        g.output(g.op(opdef.name, *inputs, **kwargs), name="y")
        ex = Executor(g.build(), passes=(), replay="native")
        feeds = {operands[0]: first}
        result = ex.run(feeds)["y"]
        native = ex.plan_for(feeds).native
        kinds = {kind for _, _, kind in native.low.labels} if native else {"python"}
        if kinds != {"native"}:
            raise KernelUnavailable(f"the native {kernel} does not take these arguments (the replay ran it as {sorted(kinds)})")
        if out is not None:
            out[...] = result
            return out
        return result

    run.__name__ = run.__qualname__ = kernel
    run.__doc__ = f"``seqjit.kernels.get({kernel!r})``'s signature, run by the native replay's kernel."
    return run


for _kernel in NATIVE_OPS:
    globals()[_kernel] = _native_kernel(_kernel)
