"""How each op becomes native instructions: one ``op_<name>`` method per op with a native kernel
(mixed into :class:`seqjit.graph.lowering.Lowering`, which supplies ``arrays``, ``emit`` and
``own``). A method raises :class:`Unsupported` for a layout its kernel does not take; the node then
runs as a Python callback. Strides are in elements; the last axis of every float operand is
contiguous.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from seqjit.graph.ops.rnn_ops import _seq_layout
from seqjit.graph.ops.t5_ops import relative_buckets

from seqjit.kernels._aligned import aligned
from seqjit.graph import kernel_choice
from seqjit.graph.derived import derived
from seqjit.kernels.activations import spec as act_spec
from seqjit.kernels.linear.packed import pack_panels
from seqjit.kernels.linear_int8 import huge_pages

OP = dict(linear=1, layer_norm=2, add=3, embedding=4, copy=5, position_at=6, kv_write=7, step_lengths=8,
          attention=9, act=10, gru_cell=11, lstm_cell=12, additive=13, select_first=14, rnn_sequence=16,
          linear_int8=17, embedding_int8=18, rnn_int8=19, rms_norm=20, mul=21, relative_bias=22)
#: a node of at least this many multiply-adds may use the run's threads; smaller ones run on the
#: calling thread. Waking a sleeping OpenMP worker cost ~50 us on the 2-core VMs, and a worker whose
#: core is busy with another process costs far more: only products of ~200 us or more pay.
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
#: halves over the team of two (kernels/_runtime/native_team.h) when a run has 2 threads: one
#: handoff costs ~0.3 us; a [1, 128] x [128, 128] product ~0.5-1 us
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
    """The ``op_*`` methods of :class:`~seqjit.graph.lowering.Lowering`."""

    def op_linear(self, node, attrs):
        x, w, b = (list(node.inputs) + [None])[:3]
        (y,) = node.outputs
        m, k, ldx = _rows(self.arrays[x])
        wa = _contig(self.arrays[w])
        my, n, ldy = _rows(self.arrays[y])  # n: the output width, whatever the weight layout
        if b is not None:
            _contig(self.arrays[b])
        if my != m:
            raise Unsupported("rows")
        threads = _threads(m * n * k)
        layout = LAYOUT_OUT_IN if attrs["weight_layout"] == "out_in" else LAYOUT_IN_OUT
        weight = w
        # packed or as stored: by measurement on this host (kernel_choice); computed weights: as they are
        if wa.nbytes <= PACK_MAX_BYTES and w in self.plan.graph.constants and kernel_choice.choose(m, k, n) == "packed":
            weight, layout = self._packed(w, wa, attrs["weight_layout"]), LAYOUT_PACKED
        self.emit("linear", [x, weight, b, y], [m, k, n, ldx, ldy, _ACT[attrs["activation"]], layout], threads=threads)

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
        huge_pages.advise(self.arrays[w])  # streamed from memory every step: 2 MB pages if large (in place)
        # a decode step's rows (up to 4): products from TEAM_MACS split in two halves over the team of two
        # (int8 Marian batch 1, 2 threads: ~520 -> 670-810 tok/s), the largest (the output projection) too
        # when the run has 2 threads (else OpenMP on all of them); more rows: OpenMP for large products
        threads = _threads(m * n * k) if m <= 4 else (0 if m * n * k >= PARALLEL_MACS else 1)
        self.emit("linear_int8", [x, w, scale, b, y, qx, xsum, xs], [m, k, n, ldx, ldy, _ACT[attrs["activation"]]],
                  threads=threads, keep=[qx, xsum, xs])

    def op_layer_norm(self, node, attrs):
        x, g, b = node.inputs
        (y,) = node.outputs
        m, d, ldx = _rows(self.arrays[x])
        _, _, ldy = _rows(self.arrays[y])
        self.emit("layer_norm", [x, g, b, y], [m, d, ldx, ldy], [attrs["eps"]])

    def op_add(self, node, attrs):
        self.emit("add", *self._elementwise(node, "add"))

    def _elementwise(self, node, name: str):
        """The operands of ``y = a <name> b`` over same-shaped contiguous arrays (no broadcasting)."""
        a, b = node.inputs
        (y,) = node.outputs
        arrs = [self.arrays[a], self.arrays[b], self.arrays[y]]
        if len({x.shape for x in arrs}) != 1:
            raise Unsupported(f"broadcasting {name}")
        for x in arrs:
            _contig(x)
        return [a, b, y], [arrs[2].size]

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
        self._attention(node, attrs, q, k, v, lengths, None)

    def op_biased_attention(self, node, attrs):
        q, k, v, bias, lengths = (list(node.inputs) + [None])[:5]
        self._attention(node, attrs, q, k, v, lengths, bias)

    def _attention(self, node, attrs, q, k, v, lengths, bias):
        """attention, or biased_attention (``bias`` [1 or B, H, Lq, Lk] added to the scaled scores)."""
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
        bias_strides = [0, 0, 0]
        if bias is not None:
            ba = self.arrays[bias]
            if ba.dtype != _F32 or ba.ndim != 4 or (Lk > 1 and ba.strides[3] != 4):
                raise Unsupported("attention bias layout")
            bias_strides = [0 if ba.shape[0] == 1 else ba.strides[0] // 4, ba.strides[1] // 4, ba.strides[2] // 4]
        scale = float(np.float32(1.0 / math.sqrt(D) if attrs["scale"] is None else attrs["scale"]))
        scratch = np.zeros(max(Lq * Lk, 1), np.float32)
        strides = [s // 4 for a in arrs for s in a.strides[:3]]
        self.emit("attention", [q, k, v, lengths, o, scratch, bias],
                  [B, H, Lq, Lk, D, Dv, int(attrs["causal"]), *strides, *bias_strides], [scale], keep=[scratch])

    def op_rms_norm(self, node, attrs):
        x, g = node.inputs
        (y,) = node.outputs
        m, d, ldx = _rows(self.arrays[x])
        _, _, ldy = _rows(self.arrays[y])
        _contig(self.arrays[g])
        self.emit("rms_norm", [x, g, y], [m, d, ldx, ldy], [attrs["eps"]])

    def op_mul(self, node, attrs):
        self.emit("mul", *self._elementwise(node, "mul"))

    def op_relative_bias(self, node, attrs):
        table, like = node.inputs
        n = self.arrays[like].shape[1]
        self._relative_bias(node, attrs, table, None, n, n, n - 1)

    def op_relative_bias_at(self, node, attrs):
        table, step, cache = node.inputs
        _contig(self.arrays[step], _I64)
        m = self.arrays[cache].shape[2]
        self._relative_bias(node, attrs, table, step, 1, m, m - 1)

    def _relative_bias(self, node, attrs, table, step, lq, lk, below):
        """relative_bias(_at): the bucket of every relative position in [-below, lk) computed here (in
        NumPy, as the Python op), the gather of the table's rows at run time (q0: 0, or ``step``)."""
        ta = _contig(self.arrays[table])
        (y,) = node.outputs
        _contig(self.arrays[y])
        buckets = np.ascontiguousarray(relative_buckets(np.arange(-below, lk), bool(attrs["bidirectional"]),
                                                        ta.shape[0], int(attrs["max_distance"])), dtype=np.int64)
        self.emit("relative_bias", [table, buckets, step, y], [ta.shape[1], below, lq, lk, int(step is not None)],
                  keep=[buckets])

    def _activation(self, node, code):
        (x,), (y,) = node.inputs, node.outputs
        xa = _contig(self.arrays[x])
        _contig(self.arrays[y])
        self.emit("act", [x, y], [xa.size, code])

    def op_relu(self, node, attrs):
        self._activation(node, act_spec.RELU)

    def op_gelu(self, node, attrs):
        self._activation(node, act_spec.GELU_TANH if attrs.get("approximate") == "tanh" else act_spec.GELU)

    def op_silu(self, node, attrs):
        self._activation(node, act_spec.SILU)

    def op_tanh(self, node, attrs):
        self._activation(node, act_spec.TANH)

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
            patches.append((0, slot, sp - _addr(self.current[slot])))
        if dst_name in self.origin:
            raise Unsupported("copy into a graph input")
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
        _contig(self.arrays[first]), _contig(self.arrays[rest])
        self.emit("select_first", [step, first, rest, y], [_contig(self.arrays[y]).nbytes])

    def op_gru_cell(self, node, attrs):
        x, h, w_ih, w_hh, b_ih, b_hh = (list(node.inputs) + [None, None])[:6]
        self._cell(node, 3, x, [h], w_ih, w_hh, b_ih, b_hh, list(node.outputs))

    def op_lstm_cell(self, node, attrs):
        x, h, c, w_ih, w_hh, b_ih, b_hh = (list(node.inputs) + [None, None])[:7]
        self._cell(node, 4, x, [h, c], w_ih, w_hh, b_ih, b_hh, list(node.outputs))

    def _cell(self, node, gates, x, states, w_ih, w_hh, b_ih, b_hh, outs):
        """gru_cell (gates 3: states [h], outs [h']) or lstm_cell (4: [h, c], [h', c']); the input
        projection folded into a gather when the lowering found a table (seqjit.graph.input_fold)."""
        h = states[0]
        bsz, hd, ldh = _rows(self.arrays[h])
        _, _, ldo = _rows(self.arrays[outs[0]])
        for n in (w_ih, w_hh, b_ih, b_hh):
            if n is not None:
                _contig(self.arrays[n])
        fold = self.folds.get(node.name)
        pre = None
        if fold is not None:
            pre = np.zeros((bsz, gates * hd), np.float32)
            ids = _contig(self.arrays[fold.ids], _I64)
            if ids.size != bsz:
                raise Unsupported("ids per row")
            self._gather(fold.ids, fold.tables[0], pre)
            x, b_ih, w_ih = fold.rest, None, None
            if x is not None:
                w_ih = f"{node.name}:w_ih_rest"
                self.arrays[w_ih] = fold.w_rest
        i, ldx = 0, 0
        if x is not None:
            _, i, ldx = _rows(self.arrays[x])
        scratch = np.zeros(2 * bsz * gates * hd, np.float32)
        threads = _threads(bsz * gates * hd * (i + hd), bsz * gates * hd * max(i, hd))
        weights, layout = self._batch_layout(bsz, *[w for w in (w_ih, w_hh) if w is not None],
                                             derived=(w_ih,) if fold is not None else ())
        w_ih, w_hh = ([None] if w_ih is None else []) + weights
        keep = [scratch] + ([] if pre is None else [pre]) + ([] if fold is None or fold.w_rest is None else [fold.w_rest])
        if gates == 3:
            self.emit("gru_cell", [x, h, w_ih, w_hh, b_ih, b_hh, outs[0], scratch, pre],
                      [bsz, i, hd, ldx, ldh, ldo, layout], threads=threads, keep=keep)
            return
        c = states[1]
        _, _, ldc = _rows(self.arrays[c])
        _contig(self.arrays[outs[0]]), _contig(self.arrays[outs[1]])
        self.emit("lstm_cell", [x, h, c, w_ih, w_hh, b_ih, b_hh, outs[0], outs[1], scratch, pre],
                  [bsz, i, hd, ldx, ldh, ldc, layout], threads=threads, keep=keep)

    def _gather(self, ids, table, out):
        """out[r] = table[ids[r]] (ids bounds-checked at run time, like the embedding's)."""
        self.emit("embedding", [ids, table, None, out], [out.shape[0], table.shape[1], 1, table.shape[0]], [1.0])

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
        specs = [None if i is None else self.plan.specs[i] for i in node.inputs]
        b, t, hidden, layers, dirs = _seq_layout("lstm" if lstm else "gru", specs, attrs)
        rb, rt = (t, 1) if attrs["batch_first"] else (1, b)
        hh = weights.get("weight_hh_l0")  # the per-step product's shape decides; packed from 5 rows when fixed
        packed = (hh is not None and all(w in self.plan.graph.constants for key, w in weights.items() if key.startswith("weight"))
                  and kernel_choice.choose(b, *self.arrays[hh].shape[::-1], packed_from=5) == "packed")
        table = []
        for k in range(layers):
            for d in range(dirs):
                sfx = f"_l{k}" + ("_reverse" if d else "")
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    w = weights.get(name + sfx)
                    if w is not None and packed and name.startswith("weight"):
                        table.append(_addr(self._packed(w, _contig(self.arrays[w]), "out_in")))
                    else:
                        table.append(0 if w is None else _addr(_contig(self.arrays[w])))
        wtab = np.array(table, np.int64)
        finite_hh = all(_finite(self.arrays[w]) for key, w in weights.items() if key.startswith("weight_hh"))
        g = 4 if lstm else 3
        fold = self.folds.get(node.name)
        ptab, pres = None, []
        if fold is not None:  # layer 0's input projection: gathers from projected-embedding tables
            if _contig(self.arrays[fold.ids], _I64).size != b * t:
                raise Unsupported("ids per row")
            for tab in fold.tables:
                pres.append(np.zeros((b * t, g * hidden), np.float32))
                self._gather(fold.ids, tab, pres[-1])
            ptab = np.array([_addr(p) for p in pres], np.int64)
        scratch = np.zeros(t * b * g * hidden + b * g * hidden + 2 * b * hidden + 2 * t * b * dirs * hidden + 16,
                           np.float32)
        macs = t * b * g * hidden * (xa.shape[2] + hidden)
        h0 = states[0]
        c0 = states[1] if lstm else None
        self.emit("rnn_sequence", [x, h0, c0, lengths, wtab, out, h_n, c_n, scratch, ptab],
                  [int(lstm), rb, rt, xa.shape[2], xa.shape[2], dirs * hidden, b, t, hidden, layers, dirs,
                   LAYOUT_PACKED if packed else LAYOUT_OUT_IN, int(finite_hh)],
                  threads=_threads(macs, b * g * hidden * hidden), keep=[wtab, scratch, *pres])

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

    def op_gru_recurrence_int8(self, node, attrs):
        self._recurrence_int8(node, attrs, lstm=False)

    def op_lstm_recurrence_int8(self, node, attrs):
        self._recurrence_int8(node, attrs, lstm=True)

    def _recurrence_int8(self, node, attrs, lstm):
        """gru/lstm_recurrence_int8 (kernels/rnn_int8/_recurrence.pxi): xg rows (b, t) equally spaced
        (a view of a merged input projection is fine), everything else contiguous."""
        n = 2 if lstm else 1
        xg, states, lengths = node.inputs[0], list(node.inputs[1:1 + n]), node.inputs[1 + n]
        w, scale, b = (list(node.inputs[2 + n:]) + [None])[:3]
        xa = self.arrays[xg]
        if xa.ndim != 3:
            raise Unsupported("xg rows")
        _, gh, ldx = _rows(xa)
        bsz, t = xa.shape[:2]
        hidden = _contig(self.arrays[w], np.dtype(np.int8)).shape[1]
        for name in [scale, b, *states, *node.outputs]:
            if name is not None:
                _contig(self.arrays[name])
        if lengths is not None:
            _contig(self.arrays[lengths], _I64)
        outs = list(node.outputs) + [None] * (3 - len(node.outputs))
        scratch = np.zeros(bsz * gh + 4 * bsz + 2 * bsz * hidden, np.float32)
        qh = np.zeros(max(bsz * hidden, 1), np.int8)
        threads = 0 if t * bsz * gh * hidden >= PARALLEL_MACS else 1
        self.emit("rnn_int8", [xg, *(states + [None])[:2], lengths, w, scale, b, *outs, scratch, qh],
                  [int(lstm), bsz, t, hidden, ldx, int(attrs["reverse"])], threads=threads, keep=[scratch, qh])
