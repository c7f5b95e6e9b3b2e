"""Run graphs: optimise once, plan once per input-shape signature, replay cheaply.

::

    ex = Executor(graph)                         # runs the default passes once
    outputs = ex.run({"src_ids": ids, "src_lengths": lengths})   # dict name -> array
    plan = ex.plan_for(feeds)                    # the cached Plan for these shapes
    print(plan.memory.summary()); print(plan.describe())

A :class:`Plan` is made for one signature (the shapes and dtypes of every input): nodes in
topological order, every value's shape inferred, each node bound to a kernel backend, and every
intermediate given a fixed view into reusable slabs (see :mod:`seqjit.graph.memory`), passed to the
kernels as ``out=``. Replay is a flat loop over prebound closures, with no allocation for planned
values. Outputs that live in planned memory (or are constants) are copied on return unless
``copy=False`` (then they are overwritten by the next run of the same plan). In-place ops (``kv_write``) update the arrays fed
to them: that is how the decoder's KV cache advances.

GPU: ``Executor(graph, backend="cuda")`` binds plans to the cuda kernels with every planned buffer a
device array and every constant uploaded once (:mod:`seqjit.graph.device_plan`); feeds may be host or
device arrays; outputs are device arrays with ``copy=False``, host copies with ``copy=True``.

Threads: a plan's buffers belong to one run at a time. :meth:`Executor.run` leases a plan for the
run (another thread gets another plan of the same signature), and a caller that keeps outputs
across runs (a decode) holds its own lease (:meth:`Executor.lease` / :meth:`Executor.release`).
"""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

import numpy as np

from seqjit.errors import GraphError, ShapeError
from seqjit.graph import profiler as _profiler
from seqjit.graph.ir import Graph
from seqjit.graph.memory import plan_buffers
from seqjit.graph.ops import BindContext, TensorSpec, get_op

_END = 1 << 60
#: signatures whose plans an executor keeps (least recently used dropped first), and the planned
#: bytes they may hold together: a G2P file run meets a few dozen (batch, length) shapes
_MAX_PLANS = 64
_MAX_PLAN_BYTES = 256 << 20
#: idle plans kept per signature (more concurrent callers than this make and drop extra plans)
_MAX_IDLE = 8
#: "native" or "python": how plans replay unless an executor says otherwise (``SEQJIT_REPLAY``)
DEFAULT_REPLAY = os.environ.get("SEQJIT_REPLAY", "native")


def check_feeds(graph: Graph, feeds: dict, device=None) -> tuple:
    """Validate ``feeds`` against the graph's inputs; return the signature (a hashable tuple).
    ``device`` (a :class:`~seqjit.graph.device_plan.DevicePlacement`): device arrays are accepted too."""
    if not isinstance(feeds, dict):
        raise TypeError(f"feeds must be a dict of input name -> numpy.ndarray, got {type(feeds).__name__}")
    sig = []
    for name, spec in graph.inputs.items():
        try:
            x = feeds[name]
        except KeyError:
            raise ValueError(f"graph {graph.name!r} needs input {name!r}; got {sorted(feeds)}") from None
        if not isinstance(x, np.ndarray) and not (device is not None and device.accepts(x)):
            raise TypeError(f"input {name!r} must be a numpy.ndarray, got {type(x).__name__}")
        kind = np.dtype(x.dtype).kind
        if (spec.dtype == "float" and kind != "f") or (spec.dtype == "int" and kind not in "iu"):
            raise TypeError(f"input {name!r} must have a {spec.dtype} dtype, got {x.dtype}")
        if spec.ndim is not None and len(x.shape) != spec.ndim:
            raise ValueError(f"input {name!r} must have {spec.ndim} dimensions, got shape {list(x.shape)}")
        sig.append((tuple(x.shape), np.dtype(x.dtype).str))
    if len(feeds) != len(graph.inputs):
        extra = sorted(set(feeds) - set(graph.inputs))
        raise ValueError(f"graph {graph.name!r} has no input(s) {extra}; its inputs: {list(graph.inputs)}")
    return tuple(sig)


def _backend_of(fn) -> str:
    module = getattr(fn, "__module__", "") or ""
    for tag, name in (("numba_cpu", "numba"), ("cython_cpu", "cython"), ("cuda", "cuda"), ("reference", "reference")):
        if module.endswith(tag):
            return name
    return "numpy"


class _RecordingContext(BindContext):
    resolved: str = "numpy"

    def kernel(self, name):
        fn = super().kernel(name)
        self.resolved = _backend_of(fn)
        return fn


class _BoundKernels:
    """The Python replay's function of each node, made on first use: a plan replayed natively calls
    the few it has no native kernel for, and the others never import their backend (Numba's import
    and first compile are a cold first call's largest cost)."""

    def __init__(self, nodes, contexts, device):
        self._nodes, self._contexts, self._device = nodes, contexts, device
        self._fns = [None] * len(nodes)

    def __len__(self) -> int:
        return len(self._fns)

    def __getitem__(self, k: int):
        fn = self._fns[k]
        if fn is None:
            op = self._nodes[k].op
            fn = self._fns[k] = (get_op(op).make if self._device is None else self._device.maker(op))(self._contexts[k])
        return fn

    def __iter__(self):
        return (self[k] for k in range(len(self._fns)))

    def backends(self) -> list:
        for k in range(len(self._fns)):
            self[k]
        return [ctx.resolved if get_op(n.op).kernel else "numpy" for n, ctx in zip(self._nodes, self._contexts)]


class Plan:
    """A graph bound to one input signature; see the module docstring."""

    def __init__(self, graph: Graph, feeds: dict, backend=None, replay: str = "python", device=None):
        self.graph = graph
        self.device = device  # a DevicePlacement: buffers, constants and op bindings on the GPU
        self.signature = None
        self.replay = replay
        self.native = None  # the lowered program (made at the first native run), or False
        self.specs: dict = {n: TensorSpec(tuple(feeds[n].shape), feeds[n].dtype) for n in graph.inputs}
        for name, value in graph.constants.items():
            self.specs[name] = TensorSpec(tuple(value.shape), value.dtype)
        attrs, modes = self._infer(graph.nodes)
        self.attrs, self.modes = attrs, modes
        self._root, self._kind = self._alias_roots(graph.nodes, modes)
        self.memory = self._plan_memory(graph.nodes, modes)
        if device is not None:
            self.memory = device.place(self.memory)
        self._bind(graph.nodes, attrs, modes, backend)

    def _infer(self, nodes):
        """Every node's full attributes and output modes; fills ``self.specs`` (shape inference)."""
        attrs, modes = [], []
        for node in nodes:
            opdef = get_op(node.op)
            where = f"graph {self.graph.name!r}, node {node.name!r} ({node.op})"
            opdef.check_arity(len(node.inputs), where)
            full = opdef.full_attrs(node.attrs, where)
            in_specs = [None if i is None else self.specs[i] for i in node.inputs]
            try:
                out_specs = opdef.infer(in_specs, full)
            except ShapeError as exc:
                raise ShapeError(f"{where}: {exc}") from None
            if len(out_specs) != len(node.outputs):
                raise GraphError(f"{where}: op makes {len(out_specs)} outputs, node names {len(node.outputs)}")
            for out, spec in zip(node.outputs, out_specs):
                self.specs[out] = TensorSpec(tuple(int(d) for d in spec.shape), np.dtype(spec.dtype))
            attrs.append(full)
            modes.append(opdef.output_modes(in_specs, full))
        return attrs, modes

    def _plan_memory(self, nodes, modes):
        """Lifetimes of the planned roots (first definition to last reader of any alias; graph
        outputs live to the end), then slab assignment (:func:`~seqjit.graph.memory.plan_buffers`)."""
        root = self._root
        last_use = {}
        for k, node in enumerate(nodes):
            for i in node.inputs:
                if i is not None:
                    last_use[root[i]] = k
            for out in node.outputs:
                last_use.setdefault(root[out], k)
        for out in self.graph.outputs:
            last_use[root[out]] = _END
        released_at: dict = {}
        for r, k in last_use.items():
            released_at.setdefault(k, []).append(r)
        order = [([o for o, m in zip(node.outputs, modes[k]) if m == "out"], released_at.get(k, []))
                 for k, node in enumerate(nodes)]
        planned = {r: True for r, kd in self._kind.items() if kd == "buf"}
        return plan_buffers(order, self.specs, planned, last_use)

    # -- aliasing --------------------------------------------------------------------------------
    def _alias_roots(self, nodes, modes):
        """root value and kind ("input", "const", "buf", "fresh") of every value; checks that no
        value is read after an in-place op updated its memory."""
        root = {n: n for n in self.graph.inputs}
        root.update({n: n for n in self.graph.constants})
        kind = {n: "input" for n in self.graph.inputs}
        kind.update({n: "const" for n in self.graph.constants})
        version: dict = {}
        seen: dict = {}
        for node, node_modes in zip(nodes, modes):
            for i in node.inputs:
                if i is not None and seen.get(i, 0) != version.get(root[i], 0):
                    raise GraphError(f"graph {self.graph.name!r}: node {node.name!r} reads {i!r} after an in-place op updated it")
            for out, mode in zip(node.outputs, node_modes):
                if mode in ("out", "fresh"):
                    root[out], kind[out] = out, ("buf" if mode == "out" else "fresh")
                    continue
                how, k = mode
                src = node.inputs[k]
                root[out] = root[src]
                if how == "inplace":
                    if kind[root[src]] == "const":
                        raise GraphError(f"graph {self.graph.name!r}: node {node.name!r} would update constant {src!r} in place")
                    version[root[src]] = version.get(root[src], 0) + 1
            for out in node.outputs:
                seen[out] = version.get(root[out], 0)
        return root, kind

    # -- binding ---------------------------------------------------------------------------------
    def _bind(self, nodes, attrs, modes, backend):
        slot = {None: 0}
        for name in list(self.graph.inputs) + list(self.graph.constants) + [o for n in nodes for o in n.outputs]:
            slot.setdefault(name, len(slot))
        env = [None] * len(slot)
        device = self.device
        for name, value in self.graph.constants.items():
            env[slot[name]] = value if device is None else device.constant(value)
        self._env, self._slot = env, slot
        self._input_slots = [(n, slot[n]) for n in self.graph.inputs]
        contexts = []
        for node, full, node_modes in zip(nodes, attrs, modes):
            outs = [self.memory.views.get(o) if m == "out" else None for o, m in zip(node.outputs, node_modes)]
            contexts.append(_RecordingContext(full, [None if i is None else self.specs[i] for i in node.inputs],
                                              [self.specs[o] for o in node.outputs], outs,
                                              self._backend_for(node, backend), node.name))
        self.nodes, self.fns, self._step_list = nodes, _BoundKernels(nodes, contexts, device), None
        self._outputs = [(o, slot[o], self._kind[self._root[o]] in ("buf", "const")) for o in self.graph.outputs]
        # slots holding feeds, views of feeds or fresh arrays: cleared after a run so the plan does
        # not keep the caller's arrays alive
        self._dynamic = [slot[v] for v in list(self.graph.inputs) + [o for n in nodes for o in n.outputs]
                         if self._kind[self._root[v]] in ("input", "fresh")]

    @property
    def backends(self) -> list:
        """The backend each node's kernel resolved to ("numpy" for glue ops)."""
        return self.fns.backends()

    @property
    def _steps(self) -> list:
        """The Python replay's closures, one per node (made on the first Python run)."""
        if self._step_list is None:
            slot, env = self._slot, self._env
            self._step_list = [_step(env, fn, [slot[i] for i in node.inputs], [slot[o] for o in node.outputs])
                               for node, fn in zip(self.nodes, self.fns)]
        return self._step_list

    @staticmethod
    def _backend_for(node, backend):
        if backend is None or isinstance(backend, str):
            return backend
        return backend.get(node.op, backend.get("*"))

    # -- running ---------------------------------------------------------------------------------
    def native_replay(self, feeds: dict):
        """The plan lowered to native code (lowered on the first call), or None when this plan
        replays in Python (``replay="python"``, or it could not be lowered)."""
        if self.native is None:
            self.native = False
            if self.replay == "native":
                from seqjit.graph.lowering import NativeReplay, Unsupported

                try:
                    self.native = NativeReplay(self, feeds)
                except Unsupported:
                    self.native = False
        return self.native or None

    def run(self, feeds: dict, *, copy: bool = True, profile: bool = False) -> dict:
        """Replay the plan on ``feeds`` (already checked against this plan's signature)."""
        if self.replay == "native":
            native = self.native_replay(feeds)
            if native is not None:
                from seqjit.kernels._threads import get_num_threads

                active = _profiler.active()
                if not (profile or active):
                    return native.run(feeds, copy=copy, nthreads=get_num_threads())
                result, records = native.run_timed(feeds, copy=copy, nthreads=get_num_threads())
                self._keep_profile(records, active, profile)
                return result
        env, device = self._env, self.device
        for name, s in self._input_slots:
            env[s] = feeds[name] if device is None else device.feed(feeds[name])
        active = _profiler.active()
        if profile or active:
            self._run_profiled(active, keep=profile)
        else:
            for step in self._steps:
                step()
        result = {}
        for name, s, owned in self._outputs:
            value = env[s]
            if device is not None:
                result[name] = device.output(value, copy)
            else:
                result[name] = value.copy() if (copy and owned) else value
        for s in self._dynamic:
            env[s] = None
        return result

    def _run_profiled(self, active, keep):
        times = []
        clock = time.perf_counter
        for step in self._steps:
            t0 = clock()
            step()
            times.append(clock() - t0)
        records = [(n.name, n.op, b, t) for n, b, t in zip(self.nodes, self.backends, times)]
        self._keep_profile(records, active, keep)

    def _keep_profile(self, records, active, keep):
        for prof in active:
            prof.add(self.graph.name, records)
        if keep:
            self.last_profile = _profiler.Profile()
            self.last_profile.add(self.graph.name, records)

    def describe(self) -> str:
        """One line per node: op, backend, output shapes, and where the outputs live."""
        lines = [f"plan for graph {self.graph.name!r}: {len(self.nodes)} nodes; {self.memory.summary()}"]
        for node, backend in zip(self.nodes, self.backends):
            outs = ", ".join(f"{o}: {self.specs[o]!r}" + (f" @buf{self.memory.slab_of[self._root[o]]}"
                             if self._root[o] in self.memory.slab_of else "") for o in node.outputs)
            lines.append(f"  {node.op:<20} {backend:<9} {outs}")
        return "\n".join(lines)


def _step(env, fn, ins, outs):
    """A zero-argument closure running one node: reads its inputs from ``env``, stores outputs."""
    if len(outs) == 1:
        o = outs[0]
        if len(ins) == 0:
            def step():
                env[o] = fn()
        elif len(ins) == 1:
            a, = ins

            def step():
                env[o] = fn(env[a])
        elif len(ins) == 2:
            a, b = ins

            def step():
                env[o] = fn(env[a], env[b])
        elif len(ins) == 3:
            a, b, c = ins

            def step():
                env[o] = fn(env[a], env[b], env[c])
        elif len(ins) == 4:
            a, b, c, d = ins

            def step():
                env[o] = fn(env[a], env[b], env[c], env[d])
        else:
            def step():
                env[o] = fn(*[env[i] for i in ins])
        return step

    def step():
        results = fn(*[env[i] for i in ins])
        for o, r in zip(outs, results):
            env[o] = r

    return step


class Executor:
    """A graph, optimised once by ``passes``, with a cache of plans keyed by input signature.

    ``backend``: None (fastest available per op), a backend name for every kernel op, or a dict
    op -> backend (key ``"*"`` for the rest). ``"cuda"`` runs on the GPU; ``device`` (a
    :class:`~seqjit.graph.device_plan.DevicePlacement`, made when not given) holds its uploaded
    constants, and may be shared by executors of one model.
    """

    def __init__(self, graph: Graph, *, passes=None, backend=None, replay: str | None = None, device=None):
        from seqjit.graph.passes import DEFAULT_PASSES, run_passes

        self.source = graph
        self.graph = run_passes(graph, DEFAULT_PASSES if passes is None else passes)
        self.backend = backend
        if backend == "cuda" and device is None:
            from seqjit.graph.device_plan import DevicePlacement

            device = DevicePlacement()
        self.device = device if backend == "cuda" else None
        replay = DEFAULT_REPLAY if replay is None else replay
        if replay not in ("native", "python"):
            raise ValueError(f"replay must be 'native' or 'python', got {replay!r}")
        # native kernels stand in for the default CPU kernels only: an explicit backend keeps its own
        self.replay = replay if backend in (None, "cython") else "python"
        self._plans: OrderedDict = OrderedDict()  # signature -> list of idle plans
        self._lock = threading.Lock()
        self._idle_bytes = 0  # planned bytes of the idle plans (the cache's size)
        self._last = None

    def _signature(self, feeds: dict) -> tuple:
        """``feeds``'s signature: taken as it is when it is one seen (and so checked) before, else
        checked by :func:`check_feeds`."""
        try:
            sig = tuple((feeds[n].shape, feeds[n].dtype.str) for n in self.graph.inputs)
        except (KeyError, AttributeError, TypeError):
            sig = None
        if sig is not None and sig in self._plans and len(feeds) == len(self.graph.inputs) \
                and all(type(feeds[n]) is np.ndarray for n in self.graph.inputs):
            return sig
        return check_feeds(self.graph, feeds, self.device)

    def lease(self, feeds: dict) -> Plan:
        """A plan for ``feeds``'s signature that no other caller uses until :meth:`release`."""
        sig = self._signature(feeds)
        with self._lock:
            idle = self._plans.get(sig)
            if idle is None:
                idle = self._plans[sig] = []
            else:
                self._plans.move_to_end(sig)
            plan = idle.pop() if idle else None
            if plan is not None:
                self._idle_bytes -= plan.memory.planned_bytes
        if plan is None:
            plan = Plan(self.graph, feeds, self.backend, self.replay, self.device)
            plan.signature = sig
        return plan

    def release(self, plan: Plan) -> None:
        """Give a leased plan back for later callers of its signature."""
        with self._lock:
            idle = self._plans.get(plan.signature)
            if idle is not None and len(idle) < _MAX_IDLE and plan not in idle:
                idle.append(plan)
                self._idle_bytes += plan.memory.planned_bytes
            self._last = plan
            while len(self._plans) > 1 and (len(self._plans) > _MAX_PLANS or self._idle_bytes > _MAX_PLAN_BYTES):
                _, dropped = self._plans.popitem(last=False)
                self._idle_bytes -= sum(p.memory.planned_bytes for p in dropped)

    def plan_for(self, feeds: dict) -> Plan:
        """A plan for ``feeds`` (for inspection: ``describe()``, ``memory``); not leased."""
        plan = self.lease(feeds)
        self.release(plan)
        return plan

    def run(self, feeds: dict, *, copy: bool = True, profile: bool = False) -> dict:
        """Outputs (dict name -> array) of the graph on ``feeds``; see :meth:`Plan.run`. With
        ``copy=False`` the outputs may be overwritten by the next run of any caller."""
        plan = self.lease(feeds)
        try:
            return plan.run(feeds, copy=copy, profile=profile)
        finally:
            self.release(plan)

    @property
    def last_profile(self):
        return getattr(self._last, "last_profile", None)
