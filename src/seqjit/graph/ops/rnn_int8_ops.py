"""int8 recurrent ops: ``gru_recurrence_int8`` / ``lstm_recurrence_int8``, the recurrence of one
layer and direction with an int8 hidden matrix over input projections computed beforehand (by a
``linear_int8`` node over every step at once). Arithmetic and packed-sequence semantics:
``kernels/rnn_int8/spec.py``; how a model's layers and cells are built from them:
:mod:`seqjit.models.rnn_int8_graphs`.

Operands (B batch, T steps, H hidden, G gates: 3 GRU, 4 LSTM): ``xg`` float32 [B, T, G*H]
(batch-first), ``h0`` (``c0``) float32 [B, H] or None, ``lengths`` int [B] or None, ``w_hh`` int8
[G*H, H], ``scale`` float32 [G*H], ``b_hh`` float32 [G*H] or None; attribute ``reverse``. Outputs:
out [B, T, H], h_n [B, H] (and c_n [B, H]).
"""
from __future__ import annotations

import numpy as np

from seqjit.graph.native_ops import _I64, PARALLEL_MACS, Unsupported, _contig, _rows
from seqjit.graph.ops import OpDef, TensorSpec, need, register

_GATES = {"gru": 3, "lstm": 4}
_F32, _I8 = np.dtype(np.float32), np.dtype(np.int8)


def _is(spec, dtype, shape) -> bool:
    return spec is not None and np.dtype(spec.dtype) == dtype and tuple(spec.shape) == shape


def _infer(mode):
    n_states, g = (1 if mode == "gru" else 2), _GATES[mode]
    where = f"{mode}_recurrence_int8"

    def infer(specs, attrs):
        xg, states, lengths = specs[0], specs[1:1 + n_states], specs[1 + n_states]
        w, scale, bias = (list(specs[2 + n_states:]) + [None])[:3]
        need(w is not None and len(w.shape) == 2 and np.dtype(w.dtype) == _I8 and w.shape[0] == g * w.shape[1],
             where, f"w_hh must be int8 [{g}*H, H], got {w}")
        h = int(w.shape[1])
        need(xg is not None and len(xg.shape) == 3 and np.dtype(xg.dtype) == _F32 and xg.shape[2] == g * h, where,
             f"xg must be float32 [B, T, {g * h}] (the input projections, batch-first), got {xg}")
        b, t = int(xg.shape[0]), int(xg.shape[1])
        need(_is(scale, _F32, (g * h,)), where, f"scale must be float32 [{g * h}], got {scale}")
        need(bias is None or _is(bias, _F32, (g * h,)), where, f"b_hh must be float32 [{g * h}], got {bias}")
        for name, s in zip(("h0", "c0"), states):
            need(s is None or _is(s, _F32, (b, h)), where, f"{name} must be float32 [{b}, {h}], got {s}")
        need(lengths is None or (np.dtype(lengths.dtype).kind in "iu" and tuple(lengths.shape) == (b,)), where,
             f"lengths must be an int vector [{b}], got {lengths}")
        state = TensorSpec((b, h), _F32)
        return [TensorSpec((b, t, h), _F32)] + [state] * n_states

    return infer


def _make(mode):
    def make(ctx):
        fn, reverse = ctx.kernel(f"{mode}_recurrence_int8"), bool(ctx.attrs["reverse"])
        if mode == "gru":
            return lambda xg, h0, lengths, w, scale, b=None: fn(xg, w, scale, b, h0=h0, lengths=lengths,
                                                                 reverse=reverse)
        return lambda xg, h0, c0, lengths, w, scale, b=None: fn(xg, w, scale, b, h0=h0, c0=c0, lengths=lengths,
                                                                 reverse=reverse)

    return make


def _lower_recurrence_int8(self, node, attrs, lstm):
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
    h0, c0 = (states + [None])[:2]
    out, h_n, c_n = outs
    self.emit("rnn_int8", xg=xg, h0=h0, c0=c0, lengths=lengths, w=w, scale=scale, bias=b, out=out, h_n=h_n, c_n=c_n,
              scratch=scratch, qh=qh, lstm=int(lstm), batch=bsz, steps=t, hidden=hidden, ldx=ldx,
              reverse=int(attrs["reverse"]), threads=threads, keep=[scratch, qh])


def lower_gru_recurrence_int8(self, node, attrs):
    _lower_recurrence_int8(self, node, attrs, lstm=False)


register(OpDef("gru_recurrence_int8", ("xg", "h0?", "lengths?", "w_hh", "scale", "b_hh?"), _infer("gru"),
               _make("gru"), attrs={"reverse": False}, modes=lambda specs, attrs: ["fresh"] * 2, n_outputs=2,
               kernel="gru_recurrence_int8", native=lower_gru_recurrence_int8))


def lower_lstm_recurrence_int8(self, node, attrs):
    _lower_recurrence_int8(self, node, attrs, lstm=True)


register(OpDef("lstm_recurrence_int8", ("xg", "h0?", "c0?", "lengths?", "w_hh", "scale", "b_hh?"), _infer("lstm"),
               _make("lstm"), attrs={"reverse": False}, modes=lambda specs, attrs: ["fresh"] * 3, n_outputs=3,
               kernel="lstm_recurrence_int8", native=lower_lstm_recurrence_int8))
