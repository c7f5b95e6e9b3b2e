"""Recurrent ops: full-sequence ``gru``/``lstm``, one-step ``gru_cell``/``lstm_cell``, Bahdanau
``additive_attention``, and ``select_first_step`` (the RNN decoders' initial-state switch).

Shapes: B batch, T time, I input features, H hidden, L layers, D directions (1 or 2), G gates
(3 GRU, 4 LSTM), S source length, A attention dim, Dq query dim, Dk key dim.

``gru``/``lstm`` take their weights as trailing operands, named by the ``keys`` attribute exactly
like ``nn.GRU``/``nn.LSTM.state_dict()`` (``weight_ih_l0``, ``bias_hh_l1_reverse``...); the kernel
gets them as its ``params`` dict. ``lengths`` gives packed-sequence semantics (see
``kernels/rnn/spec.py``).
"""
from __future__ import annotations

import re

import numpy as np

from seqjit.graph import kernel_choice
from seqjit.graph.native_ops import (_I64, LAYOUT_OUT_IN, LAYOUT_PACKED, Unsupported, _addr, _contig, _finite, _rows,
                                     _threads)
from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, need_dtype_match, need_float, register

_LAYER_KEY = re.compile(r"^weight_hh_l(\d+)(_reverse)?$")
_GATES = {"gru": 3, "lstm": 4}


def _out(ctx, k=0):
    return ctx.outs[k] if ctx.outs else None


def _is_int_vector(spec, batch):
    return spec is not None and np.dtype(spec.dtype).kind in "iu" and tuple(spec.shape) == (batch,)


# -- gru / lstm over a sequence -------------------------------------------------------------------
def _seq_layout(mode, specs, attrs):
    """(B, T, H, L, D) of a gru/lstm node, checking its operands."""
    n_states = 1 if mode == "gru" else 2
    x, states, lengths = specs[0], specs[1:1 + n_states], specs[1 + n_states]
    weights = dict(zip(attrs["keys"], specs[2 + n_states:]))
    where = mode
    need_float(x, "x", where)
    need(len(x.shape) == 3, where, f"x must be [B, T, I] (batch_first) or [T, B, I], got {x}")
    need(len(weights) == len(attrs["keys"]) == len(specs) - 2 - n_states, where,
         f"the weight operands must match keys {list(attrs['keys'])}")
    layers = [_LAYER_KEY.match(k) for k in weights]
    layers = [m for m in layers if m]
    need("weight_hh_l0" in weights, where, "keys must include 'weight_hh_l0'")
    w = weights["weight_hh_l0"]
    g = _GATES[mode]
    need(len(w.shape) == 2 and w.shape[0] == g * w.shape[1], where, f"weight_hh_l0 must be [{g}*H, H], got {w}")
    hidden = int(w.shape[1])
    num_layers = 1 + max(int(m.group(1)) for m in layers)
    dirs = 2 if any(m.group(2) for m in layers) else 1
    b, t = (x.shape[0], x.shape[1]) if attrs["batch_first"] else (x.shape[1], x.shape[0])
    for name, s in zip(("h0", "c0"), states):
        need(s is None or tuple(s.shape) == (num_layers * dirs, b, hidden), where,
             f"{name} must be [{num_layers * dirs}, {b}, {hidden}], got {s}")
    need(lengths is None or _is_int_vector(lengths, b), where, f"lengths must be an int vector [{b}], got {lengths}")
    need_dtype_match([x, *states, *weights.values()], ["x", "h0", "c0"][:1 + n_states] + list(weights), where)
    return b, t, hidden, num_layers, dirs


def _seq_infer(mode):
    def infer(specs, attrs):
        b, t, h, layers, dirs = _seq_layout(mode, specs, attrs)
        dt = specs[0].dtype
        out = (b, t, dirs * h) if attrs["batch_first"] else (t, b, dirs * h)
        state = TensorSpec((layers * dirs, b, h), dt)
        return [TensorSpec(out, dt)] + [state] * (1 if mode == "gru" else 2)

    return infer


def _seq_make(mode):
    def make(ctx):
        fn, keys, batch_first = ctx.kernel(mode), tuple(ctx.attrs["keys"]), bool(ctx.attrs["batch_first"])
        if mode == "gru":
            def gru(x, h0, lengths, *weights):
                return fn(x, dict(zip(keys, weights)), h0=h0, lengths=lengths, batch_first=batch_first)

            return gru

        def lstm(x, h0, c0, lengths, *weights):
            state0 = None if h0 is None and c0 is None else (h0, c0)
            out, (h_n, c_n) = fn(x, dict(zip(keys, weights)), state0=state0, lengths=lengths, batch_first=batch_first)
            return out, h_n, c_n

        return lstm

    return make


def _lower_sequence(self, node, attrs, lstm):
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
    self.emit("rnn_sequence", x=x, h0=h0, c0=c0, lengths=lengths, wtab=wtab, out=out, h_n=h_n, c_n=c_n,
              scratch=scratch, ptab=ptab, lstm=int(lstm), rb=rb, rt=rt, ldx=xa.shape[2], input_size=xa.shape[2],
              ldo=dirs * hidden, batch=b, steps=t, hidden=hidden, layers=layers, dirs=dirs,
              layout=LAYOUT_PACKED if packed else LAYOUT_OUT_IN, finite_hh=int(finite_hh),
              threads=_threads(macs, b * g * hidden * hidden), keep=[wtab, scratch, *pres])


def lower_gru(self, node, attrs):
    _lower_sequence(self, node, attrs, lstm=False)


def _seq_device(mode):
    """gru/lstm on device arrays: ``lengths`` read on the host (its host mirror, else a copy)."""
    def bind(ctx):
        from seqjit.graph.device_ops import _cuda, bind_contiguous  # (numba.cuda: imported on a device only)

        fn = _seq_make(mode)(ctx)
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


register(OpDef("gru", ("x", "h0?", "lengths?", "*weights"), _seq_infer("gru"), _seq_make("gru"),
               attrs={"keys": REQUIRED, "batch_first": False}, modes=lambda specs, attrs: ["fresh"] * 2,
               n_outputs=2, kernel="gru", native=lower_gru,
               device=_seq_device("gru")))


def lower_lstm(self, node, attrs):
    _lower_sequence(self, node, attrs, lstm=True)


register(OpDef("lstm", ("x", "h0?", "c0?", "lengths?", "*weights"), _seq_infer("lstm"), _seq_make("lstm"),
               attrs={"keys": REQUIRED, "batch_first": False}, modes=lambda specs, attrs: ["fresh"] * 3,
               n_outputs=3, kernel="lstm", native=lower_lstm,
               device=_seq_device("lstm")))


# -- one step: gru_cell / lstm_cell ---------------------------------------------------------------
def _cell_infer(mode):
    def infer(specs, attrs):
        n_states = 1 if mode == "gru" else 2
        x, states = specs[0], specs[1:1 + n_states]
        w_ih, w_hh = specs[1 + n_states:3 + n_states]
        biases = (list(specs[3 + n_states:]) + [None, None])[:2]
        where, g = f"{mode}_cell", _GATES[mode]
        need_float(x, "x", where)
        need(len(x.shape) == 2, where, f"x must be [B, I], got {x}")
        need(len(w_hh.shape) == 2 and w_hh.shape[0] == g * w_hh.shape[1], where, f"w_hh must be [{g}*H, H], got {w_hh}")
        h = w_hh.shape[1]
        need(tuple(w_ih.shape) == (g * h, x.shape[1]), where, f"w_ih must be [{g * h}, {x.shape[1]}], got {w_ih}")
        for name, s in zip(("h", "c"), states):
            need(tuple(s.shape) == (x.shape[0], h), where, f"{name} must be [{x.shape[0]}, {h}], got {s}")
        for name, s in zip(("b_ih", "b_hh"), biases):
            need(s is None or tuple(s.shape) == (g * h,), where, f"{name} must be [{g * h}], got {s}")
        need_dtype_match([x, *states, w_ih, w_hh, *biases], ["x", "h", "c"][:1 + n_states] + ["w_ih", "w_hh", "b_ih", "b_hh"], where)
        return [TensorSpec((x.shape[0], h), x.dtype)] * n_states

    return infer


def _gru_cell_make(ctx):
    fn, out = ctx.kernel("gru_cell"), _out(ctx)
    return lambda x, h, w_ih, w_hh, b_ih=None, b_hh=None: fn(x, h, w_ih, w_hh, b_ih, b_hh, out=out)


def _lstm_cell_make(ctx):
    fn = ctx.kernel("lstm_cell")
    return lambda x, h, c, w_ih, w_hh, b_ih=None, b_hh=None: fn(x, h, c, w_ih, w_hh, b_ih, b_hh)


def _lower_cell(self, node, gates, x, states, w_ih, w_hh, b_ih, b_hh, outs):
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
        self.emit("gru_cell", x=x, h=h, w_ih=w_ih, w_hh=w_hh, b_ih=b_ih, b_hh=b_hh, out=outs[0], scratch=scratch,
                  pre=pre, batch=bsz, input_size=i, hidden=hd, ldx=ldx, ldh=ldh, ldo=ldo, layout=layout,
                  threads=threads, keep=keep)
        return
    c = states[1]
    _, _, ldc = _rows(self.arrays[c])
    _contig(self.arrays[outs[0]]), _contig(self.arrays[outs[1]])
    self.emit("lstm_cell", x=x, h=h, c=c, w_ih=w_ih, w_hh=w_hh, b_ih=b_ih, b_hh=b_hh, h_out=outs[0], c_out=outs[1],
              scratch=scratch, pre=pre, batch=bsz, input_size=i, hidden=hd, ldx=ldx, ldh=ldh, ldc=ldc, layout=layout,
              threads=threads, keep=keep)


def lower_gru_cell(self, node, attrs):
    x, h, w_ih, w_hh, b_ih, b_hh = (list(node.inputs) + [None, None])[:6]
    _lower_cell(self, node, 3, x, [h], w_ih, w_hh, b_ih, b_hh, list(node.outputs))


register(OpDef("gru_cell", ("x", "h", "w_ih", "w_hh", "b_ih?", "b_hh?"), _cell_infer("gru"), _gru_cell_make,
               kernel="gru_cell", native=lower_gru_cell))


def lower_lstm_cell(self, node, attrs):
    x, h, c, w_ih, w_hh, b_ih, b_hh = (list(node.inputs) + [None, None])[:7]
    _lower_cell(self, node, 4, x, [h, c], w_ih, w_hh, b_ih, b_hh, list(node.outputs))


register(OpDef("lstm_cell", ("x", "h", "c", "w_ih", "w_hh", "b_ih?", "b_hh?"), _cell_infer("lstm"), _lstm_cell_make,
               modes=lambda specs, attrs: ["fresh", "fresh"], n_outputs=2, kernel="lstm_cell", native=lower_lstm_cell))


# -- Bahdanau attention: query [B, Dq], keys_proj [B, S, A], keys [B, S, Dk] -----------------------
def _additive_infer(specs, attrs):
    q, kp, k, w_q, v = specs[:5]
    lengths = specs[5] if len(specs) > 5 else None
    where = "additive_attention"
    for name, s in (("query", q), ("keys_proj", kp), ("keys", k), ("w_q", w_q), ("v", v)):
        need_float(s, name, where)
    need(len(q.shape) == 2 and len(kp.shape) == 3 and len(k.shape) == 3, where,
         f"query must be [B, Dq], keys_proj [B, S, A], keys [B, S, Dk]; got {q}, {kp}, {k}")
    b, s, a = kp.shape
    need(q.shape[0] == b and k.shape[:2] == (b, s), where, f"batch/length mismatch: query {q}, keys_proj {kp}, keys {k}")
    need(tuple(w_q.shape) == (a, q.shape[1]), where, f"w_q must be [{a}, {q.shape[1]}], got {w_q}")
    need(tuple(v.shape) == (a,), where, f"v must be [{a}], got {v}")
    need(lengths is None or _is_int_vector(lengths, b), where, f"lengths must be an int vector [{b}], got {lengths}")
    need_dtype_match([q, kp, k, w_q, v], ["query", "keys_proj", "keys", "w_q", "v"], where)
    return [TensorSpec((b, k.shape[2]), q.dtype), TensorSpec((b, s), q.dtype)]


def _additive_make(ctx):
    fn = ctx.kernel("additive_attention")
    return lambda q, kp, k, w_q, v, lengths=None: fn(q, kp, k, w_q, v, lengths=lengths)


def lower_additive_attention(self, node, attrs):
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
    self.emit("additive", query=q, keys_proj=kp, keys=k, w_q=w_q, v=v, lengths=lengths, context=ctx, weights=wts,
              scratch=scratch, batch=bsz, s=s, a=a, dq=dq, dk=ka.shape[2], ldq=ldq, layout=layout, keep=[scratch])


register(OpDef("additive_attention", ("query", "keys_proj", "keys", "w_q", "v", "lengths?"), _additive_infer,
               _additive_make, modes=lambda specs, attrs: ["fresh", "fresh"], n_outputs=2, kernel="additive_attention",
               native=lower_additive_attention))


# -- select_first_step: ``first`` at step 0, else ``rest`` (copied into the output) ---------------
def _select_infer(specs, attrs):
    step, first, rest = specs
    where = "select_first_step"
    need(np.dtype(step.dtype).kind in "iu" and step.shape in ((), (1,)), where, f"step must be an integer scalar, got {step}")
    need(tuple(first.shape) == tuple(rest.shape), where, f"first and rest must have one shape, got {first} and {rest}")
    need_dtype_match([first, rest], ["first", "rest"], where)
    return [rest]


def _select_make(ctx):
    out, spec = _out(ctx), ctx.out_specs[0]

    def select_first_step(step, first, rest):
        dst = np.empty(spec.shape, spec.dtype) if out is None else out
        np.copyto(dst, first if int(step) == 0 else rest)
        return dst

    return select_first_step


def lower_select_first_step(self, node, attrs):
    step, first, rest = node.inputs
    (y,) = node.outputs
    _contig(self.arrays[step], _I64)
    _contig(self.arrays[first]), _contig(self.arrays[rest])
    self.emit("select_first", step=step, first=first, rest=rest, y=y, nbytes=_contig(self.arrays[y]).nbytes)


def _select_first_step_device(ctx):
    from seqjit.graph.device_ops import buffer, layout  # (numba.cuda: imported on a device only)

    out = buffer(ctx)
    return lambda step, first, rest: layout.copy(first if int(step) == 0 else rest, out)


register(OpDef("select_first_step", ("step", "first", "rest"), _select_infer, _select_make,
               native=lower_select_first_step, device=_select_first_step_device))
