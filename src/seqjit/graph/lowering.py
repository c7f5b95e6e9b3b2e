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

import math

import numpy as np

from seqjit.kernels.activations import spec as act_spec

OP = dict(linear=1, layer_norm=2, add=3, embedding=4, copy=5, position_at=6, kv_write=7, step_lengths=8,
          attention=9, act=10, gru_cell=11, lstm_cell=12, additive=13, select_first=14, rnn_sequence=16,
          linear_int8=17, embedding_int8=18)
#: a node of at least this many multiply-adds may use the run's threads; smaller ones run on the
#: calling thread. Waking a sleeping OpenMP worker cost ~50 us on the 2-core VMs, and a worker whose
#: core is busy with another process costs far more: only products of ~200 us or more pay.
PARALLEL_MACS = 1 << 24
#: a linear of more than 4 rows runs on the transposed weight ("in_out": a broadcast kernel without
#: horizontal sums); weights up to this size get a transposed copy, shared by the graph's plans
TRANSPOSE_MAX_BYTES = 16 << 20
_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_ACT = {None: act_spec.NONE, "relu": act_spec.RELU, "gelu": act_spec.GELU, "gelu_tanh": act_spec.GELU_TANH,
        "silu": act_spec.SILU, "tanh": act_spec.TANH}


class Unsupported(Exception):
    """This node (or plan) has no native form; the caller falls back."""


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


class Lowering:
    """Builds the program of one plan; see the module docstring."""

    def __init__(self, plan, feeds: dict):
        from seqjit.graph._native_vm import Program

        self.plan = plan
        self.inputs = list(plan.graph.inputs)
        self.prog = Program(len(self.inputs))
        self.arrays: dict = {}
        self.origin: dict = {}  # value -> (input slot, derive(root array) -> array)
        for s, name in enumerate(self.inputs):
            self.arrays[name] = feeds[name]
            self.origin[name] = (s, _identity)
        self.arrays.update(plan.graph.constants)
        self.current: list = [feeds[n] for n in self.inputs]  # the arrays of the run in progress
        #: (node name, op, "native" or "python") of each instruction, for the profiler
        self.labels: list = []
        for node, attrs, modes, fn in zip(plan.nodes, plan.attrs, plan.modes, plan.fns):
            before = len(self.prog)
            self._lower(node, attrs, modes, fn)
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

    def emit(self, op, operands, ints=(), floats=(), threads=1, keep=()):
        ptrs, patches = self._ptrs(operands)
        self.prog.add(OP[op], ptrs, [int(i) for i in ints], [float(f) for f in floats], threads, patches, keep)

    def own(self, spec) -> np.ndarray:
        return np.zeros(spec.shape, spec.dtype)

    # -- nodes -------------------------------------------------------------------------------------
    def _lower(self, node, attrs, modes, fn):
        self._called_back = False
        plan = self.plan
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
        handler = getattr(self, "op_" + node.op, None)
        try:
            if handler is None:
                raise Unsupported(node.op)
            handler(node, attrs)
        except Unsupported:
            self._callback(node, fn, modes)

    def _view(self, node, fn):
        src = node.inputs[0]
        args = [self.arrays[i] if i is not None else None for i in node.inputs]
        view = fn(*args)
        if not np.shares_memory(view, args[0]):
            raise_copy = True
        else:
            raise_copy = False
        out = node.outputs[0]
        if raise_copy:  # the view op had to copy: materialise it each run
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

    # -- one method per op -------------------------------------------------------------------------
    def op_linear(self, node, attrs):
        x, w, b = (list(node.inputs) + [None])[:3]
        (y,) = node.outputs
        m, k, ldx = _rows(self.arrays[x])
        wa = _contig(self.arrays[w])
        my, n, ldy = _rows(self.arrays[y])
        if b is not None:
            _contig(self.arrays[b])
        if my != m:
            raise Unsupported("rows")
        threads = 0 if m * n * k >= PARALLEL_MACS else 1
        layout = 0 if attrs["weight_layout"] == "out_in" else 1
        weight = w
        if layout == 0 and m > 4 and wa.nbytes <= TRANSPOSE_MAX_BYTES:
            weight, layout = self._transposed(w, wa), 1
        self.emit("linear", [x, weight, b, y], [m, k, n, ldx, ldy, _ACT[attrs["activation"]], layout], threads=threads)

    def _batch_layout(self, rows, *weights):
        """The weights (value names) as the kernel should read them for ``rows`` rows: as stored
        (layout 0, "out_in": the dot-product GEMV, best for a few rows), or transposed copies
        (layout 1, "in_out": the broadcast kernel, best for more)."""
        if rows <= 4 or any(self.arrays[w].nbytes > TRANSPOSE_MAX_BYTES for w in weights):
            return list(weights), 0
        return [self._transposed(w, _contig(self.arrays[w])) for w in weights], 1

    def _transposed(self, name, w):
        """``w.T`` contiguous, made once per graph (shared by its plans)."""
        cache = self.plan.graph.__dict__.setdefault("_native_transposed", {})
        wt = cache.get(name)
        if wt is None:
            wt = cache[name] = np.ascontiguousarray(w.T)
        return wt

    def op_linear_int8(self, node, attrs):
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
        threads = 0 if m * n * k >= PARALLEL_MACS else 1
        self.emit("linear_int8", [x, w, scale, b, y, qx, xsum, xs], [m, k, n, ldx, ldy, _ACT[attrs["activation"]]],
                  threads=threads, keep=[qx, xsum, xs])

    def op_layer_norm(self, node, attrs):
        x, g, b = node.inputs
        (y,) = node.outputs
        m, d, ldx = _rows(self.arrays[x])
        _, _, ldy = _rows(self.arrays[y])
        self.emit("layer_norm", [x, g, b, y], [m, d, ldx, ldy], [attrs["eps"]])

    def op_add(self, node, attrs):
        a, b = node.inputs
        (y,) = node.outputs
        arrs = [self.arrays[a], self.arrays[b], self.arrays[y]]
        if len({x.shape for x in arrs}) != 1:
            raise Unsupported("broadcasting add")
        for x in arrs:
            _contig(x)
        self.emit("add", [a, b, y], [arrs[2].size])

    def op_embedding(self, node, attrs):
        ids, table, pos = (list(node.inputs) + [None])[:3]
        (y,) = node.outputs
        ia, ta = _contig(self.arrays[ids], _I64), _contig(self.arrays[table])
        _contig(self.arrays[y])
        length = 1
        if pos is not None:
            length = _contig(self.arrays[pos]).shape[0]
        self.emit("embedding", [ids, table, pos, y], [ia.size, ta.shape[1], length, ta.shape[0]], [attrs["scale"]])

    def op_embedding_int8(self, node, attrs):
        ids, table, row_scale, pos = (list(node.inputs) + [None])[:4]
        (y,) = node.outputs
        ia, ta = _contig(self.arrays[ids], _I64), _contig(self.arrays[table], np.dtype(np.int8))
        _contig(self.arrays[row_scale]), _contig(self.arrays[y])
        length = 1 if pos is None else _contig(self.arrays[pos]).shape[0]
        self.emit("embedding_int8", [ids, table, pos, y, row_scale], [ia.size, ta.shape[1], length, ta.shape[0]],
                  [float(np.float32(attrs["scale"]))])

    def op_position_at(self, node, attrs):
        table, step = node.inputs
        (y,) = node.outputs
        ta = _contig(self.arrays[table])
        _contig(self.arrays[step], _I64)
        self.arrays[y] = self.own(self.plan.specs[y])
        self.emit("position_at", [table, step, self.arrays[y]], [ta.shape[1], attrs["offset"], ta.shape[0]])

    def op_kv_write(self, node, attrs):
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
        self.emit("kv_write", [cache, x, step], [b, h, t, d, xv.strides[0] // 4, xv.strides[1] // 4])

    def op_step_lengths(self, node, attrs):
        step, _ = node.inputs
        (y,) = node.outputs
        _contig(self.arrays[step], _I64)
        self.emit("step_lengths", [step, y], [_contig(self.arrays[y], _I64).size])

    def op_attention(self, node, attrs):
        if attrs["return_weights"]:
            raise Unsupported("attention weights")
        q, k, v, lengths = (list(node.inputs) + [None])[:4]
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
        scale = float(np.float32(1.0 / math.sqrt(D) if attrs["scale"] is None else attrs["scale"]))
        scratch = np.zeros(max(Lq * Lk, 1), np.float32)
        strides = [s // 4 for a in arrs for s in a.strides[:3]]
        self.emit("attention", [q, k, v, lengths, o, scratch], [B, H, Lq, Lk, D, Dv, int(attrs["causal"]), *strides],
                  [scale], keep=[scratch])

    def _activation(self, node, code):
        (x,), (y,) = node.inputs, node.outputs
        xa, ya = _contig(self.arrays[x]), _contig(self.arrays[y])
        self.emit("act", [x, y], [xa.size, code])
        del ya

    def op_relu(self, node, attrs):
        self._activation(node, act_spec.RELU)

    def op_gelu(self, node, attrs):
        self._activation(node, act_spec.GELU_TANH if attrs.get("approximate") == "tanh" else act_spec.GELU)

    def op_silu(self, node, attrs):
        self._activation(node, act_spec.SILU)

    def op_tanh(self, node, attrs):
        self._activation(node, act_spec.TANH)

    def _copy(self, src: np.ndarray, dst_name_or_arr, extra_keep=()):
        """A strided copy of the array ``src`` (a view of value arrays) into ``dst``."""
        dst = self.arrays[dst_name_or_arr] if isinstance(dst_name_or_arr, str) else dst_name_or_arr
        if src.shape != dst.shape or src.dtype != dst.dtype or src.dtype.itemsize not in (4, 8):
            raise Unsupported("copy")
        shape, ss = _strides4(src.shape, src.strides, src.itemsize)
        _, ds = _strides4(dst.shape, dst.strides, dst.itemsize)
        return shape, ss, ds

    def _emit_copy(self, src_name, src_view, dst_name, dst_view):
        shape, ss, ds = self._copy(src_view, dst_view)
        base_src, base_dst = self.arrays[src_name], self.arrays[dst_name]
        patches = []
        sp = _addr(src_view)
        if src_name in self.origin:
            slot, _ = self.origin[src_name]
            patches.append((0, slot, sp - _addr(self.current[slot])))
        del base_src, base_dst
        self.prog.add(OP["copy"], [sp, _addr(dst_view)], [4, *shape, *ss, *ds, src_view.itemsize], (), 1, patches, ())

    def op_split_heads(self, node, attrs):
        (x,), (y,) = node.inputs, node.outputs
        b, h, l, d = self.arrays[y].shape
        xv = self.arrays[x].reshape(b, l, h, d).transpose(0, 2, 1, 3)
        if not np.shares_memory(xv, self.arrays[x]):
            raise Unsupported("split_heads source")
        self._emit_copy(x, xv, y, self.arrays[y])

    def op_merge_heads(self, node, attrs):
        (x,), (y,) = node.inputs, node.outputs
        xa = self.arrays[x]
        b, h, l, d = xa.shape
        yv = self.arrays[y].reshape(b, l, h, d)
        if not np.shares_memory(yv, self.arrays[y]):
            raise Unsupported("merge_heads target")
        self._emit_copy(x, xa.transpose(0, 2, 1, 3), y, yv)

    def op_transpose(self, node, attrs):
        (x,), (y,) = node.inputs, node.outputs
        self._emit_copy(x, self.arrays[x].transpose(tuple(attrs["axes"])), y, self.arrays[y])

    def op_concat(self, node, attrs):
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

    def op_select_first_step(self, node, attrs):
        step, first, rest = node.inputs
        (y,) = node.outputs
        _contig(self.arrays[step], _I64)
        fa, ra, ya = (_contig(self.arrays[n]) for n in (first, rest, y))
        self.emit("select_first", [step, first, rest, y], [ya.nbytes])
        del fa, ra

    def op_gru_cell(self, node, attrs):
        x, h, w_ih, w_hh, b_ih, b_hh = (list(node.inputs) + [None, None])[:6]
        (y,) = node.outputs
        bsz, i, ldx = _rows(self.arrays[x])
        _, hd, ldh = _rows(self.arrays[h])
        _, _, ldo = _rows(self.arrays[y])
        for n in (w_ih, w_hh, b_ih, b_hh):
            if n is not None:
                _contig(self.arrays[n])
        scratch = np.zeros(2 * bsz * 3 * hd, np.float32)
        threads = 0 if bsz * 3 * hd * (i + hd) >= PARALLEL_MACS else 1
        (w_ih, w_hh), layout = self._batch_layout(bsz, w_ih, w_hh)
        self.emit("gru_cell", [x, h, w_ih, w_hh, b_ih, b_hh, y, scratch], [bsz, i, hd, ldx, ldh, ldo, layout],
                  threads=threads, keep=[scratch])

    def op_lstm_cell(self, node, attrs):
        x, h, c, w_ih, w_hh, b_ih, b_hh = (list(node.inputs) + [None, None])[:7]
        ho, co = node.outputs
        bsz, i, ldx = _rows(self.arrays[x])
        _, hd, ldh = _rows(self.arrays[h])
        _, _, ldc = _rows(self.arrays[c])
        for n in (w_ih, w_hh, b_ih, b_hh):
            if n is not None:
                _contig(self.arrays[n])
        _contig(self.arrays[ho]), _contig(self.arrays[co])
        scratch = np.zeros(2 * bsz * 4 * hd, np.float32)
        threads = 0 if bsz * 4 * hd * (i + hd) >= PARALLEL_MACS else 1
        (w_ih, w_hh), layout = self._batch_layout(bsz, w_ih, w_hh)
        self.emit("lstm_cell", [x, h, c, w_ih, w_hh, b_ih, b_hh, ho, co, scratch], [bsz, i, hd, ldx, ldh, ldc, layout],
                  threads=threads, keep=[scratch])

    def op_gru(self, node, attrs):
        self._sequence(node, attrs, lstm=False)

    def op_lstm(self, node, attrs):
        self._sequence(node, attrs, lstm=True)

    def _sequence(self, node, attrs, lstm):
        n_states = 2 if lstm else 1
        x, states, lengths = node.inputs[0], node.inputs[1:1 + n_states], node.inputs[1 + n_states]
        weights = dict(zip(attrs["keys"], node.inputs[2 + n_states:]))
        xa = _contig(self.arrays[x])
        out, h_n = self.arrays[node.outputs[0]], self.arrays[node.outputs[1]]
        c_n = self.arrays[node.outputs[2]] if lstm else None
        for a in (out, h_n, c_n):
            if a is not None:
                _contig(a)
        for s_ in states:
            if s_ is not None:
                _contig(self.arrays[s_])
        if lengths is not None:
            _contig(self.arrays[lengths], _I64)
        layers = 1 + max(int(k.rsplit("_l", 1)[1].split("_")[0]) for k in weights if k.startswith("weight_hh_l"))
        dirs = 2 if any(k.endswith("_reverse") for k in weights) else 1
        hidden = self.arrays[weights["weight_hh_l0"]].shape[1]
        b, t = (xa.shape[0], xa.shape[1]) if attrs["batch_first"] else (xa.shape[1], xa.shape[0])
        rb, rt = (t, 1) if attrs["batch_first"] else (1, b)
        transpose = b > 4
        table = []
        for k in range(layers):
            for d in range(dirs):
                sfx = f"_l{k}" + ("_reverse" if d else "")
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    w = weights.get(name + sfx)
                    if w is not None and transpose and name.startswith("weight"):
                        table.append(_addr(self._transposed(w, _contig(self.arrays[w]))))
                    else:
                        table.append(0 if w is None else _addr(_contig(self.arrays[w])))
        wtab = np.array(table, np.int64)
        g = 4 if lstm else 3
        scratch = np.zeros(t * b * g * hidden + b * g * hidden + 2 * b * hidden + 2 * t * b * dirs * hidden + 16,
                           np.float32)
        macs = t * b * g * hidden * (xa.shape[2] + hidden)
        h0 = states[0]
        c0 = states[1] if lstm else None
        self.emit("rnn_sequence", [x, h0, c0, lengths, wtab, out, h_n, c_n, scratch],
                  [int(lstm), rb, rt, xa.shape[2], xa.shape[2], dirs * hidden, b, t, hidden, layers, dirs,
                   int(transpose)],
                  threads=0 if macs >= PARALLEL_MACS else 1, keep=[wtab, scratch])

    def op_additive_attention(self, node, attrs):
        q, kp, k, w_q, v, lengths = (list(node.inputs) + [None])[:6]
        ctx, wts = node.outputs
        bsz, dq, ldq = _rows(self.arrays[q])
        kpa, ka = _contig(self.arrays[kp]), _contig(self.arrays[k])
        _contig(self.arrays[w_q]), _contig(self.arrays[v])
        if lengths is not None:
            _contig(self.arrays[lengths], _I64)
        _contig(self.arrays[ctx]), _contig(self.arrays[wts])
        s, a = kpa.shape[1], kpa.shape[2]
        scratch = np.zeros(bsz * a + a, np.float32)
        (w_q,), layout = self._batch_layout(bsz, w_q)
        self.emit("additive", [q, kp, k, w_q, v, lengths, ctx, wts, scratch], [bsz, s, a, dq, ka.shape[2], ldq, layout],
                  keep=[scratch])


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
        self.n_callbacks = sum(1 for _ in range(0))

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
            n = arr.size
            prog.add(OP["copy"], [_addr(arr), _addr(self.low.current[slot])],
                     [4, 1, 1, 1, n, 0, 0, 0, 1, 0, 0, 0, 1, arr.itemsize], (), 1, [(1, slot, 0)], [arr])
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
