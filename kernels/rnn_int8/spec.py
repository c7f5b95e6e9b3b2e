"""gru_recurrence_int8 / lstm_recurrence_int8: the recurrence of one GRU/LSTM layer and direction
with an int8 hidden matrix, given the input projections of every step.

    gru_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, lengths=None, reverse=False, sums=None)
        -> (out, h_n)
    lstm_recurrence_int8(xg, w_hh, scale, b_hh=None, *, h0=None, c0=None, lengths=None, reverse=False,
                         sums=None) -> (out, h_n, c_n)

An int8 RNN layer is ``xg = linear_int8(x, W_ih, s_ih, b_ih)`` over all rows and steps at once (the
``linear_int8`` family) followed by this recurrence; a decoder cell is the same with one step.

- ``xg`` float32 ``[B, T, G*H]`` (batch-first): ``W_ih x_t + b_ih`` of every row and step, gates in
  PyTorch's order (GRU r, z, n: G = 3; LSTM i, f, g, o: G = 4);
- ``w_hh`` int8 ``[G*H, H]`` with its float32 row scales ``scale`` ``[G*H]`` (symmetric per gate
  row, see :mod:`seqjit.kernels.linear_int8`), ``b_hh`` float32 ``[G*H]`` or None;
- ``h0`` / ``c0`` float32 ``[B, H]`` or None (zeros);
- ``lengths`` ``[B]`` (integers in ``[0, T]``) or None (every row runs T steps): packed-sequence
  semantics as in :mod:`seqjit.kernels.rnn.spec`: row b runs its first ``lengths[b]`` steps only,
  the ``reverse`` direction from step ``lengths[b] - 1`` back to 0; outputs past a row's length are
  zero; its final state is the state after its own last step (``h0`` for a length of 0).
- out float32 ``[B, T, H]``; ``h_n`` / ``c_n`` float32 ``[B, H]``;
- ``sums`` (tests): an int32 host array ``[T, B, G*H]`` that receives the exact int32 sums of every
  step's hidden product for the rows running at that step (zero for the others).

Each step (the arithmetic in :mod:`.reference`): the hidden projection
``hg = linear_int8(h, w_hh, scale, b_hh)`` (h quantized per row on every step: dynamic quantization;
exact int32 sums; dequantize + bias in float), then the float32 gate math of
:func:`seqjit.kernels.rnn.reference.gru_gates` / ``lstm_gates`` on ``xg[b, t]`` and ``hg[b]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqjit.kernels import _checks
from seqjit.kernels.linear_int8.spec import K_MAX

GATES = {"gru": 3, "lstm": 4}
_F32 = (np.dtype(np.float32),)
_I8 = (np.dtype(np.int8),)


@dataclass
class Recurrence:
    """A checked call. ``out``/``h_n``/``c_n`` are None when ``device`` (the backend allocates)."""

    lstm: bool
    xg: np.ndarray  # [B, T, G*H] float32 (a device array on the cuda backend)
    w_hh: np.ndarray  # [G*H, H] int8
    scale: np.ndarray  # [G*H] float32
    b_hh: np.ndarray | None  # [G*H] float32
    h0: np.ndarray | None  # [B, H]
    c0: np.ndarray | None  # [B, H] (lstm)
    lengths: np.ndarray  # int64 [B]
    reverse: bool
    hidden: int
    sums: np.ndarray | None = None  # [T, B, G*H] int32 (zeroed here)
    out: np.ndarray | None = None  # [B, T, H]
    h_n: np.ndarray | None = None  # [B, H]
    c_n: np.ndarray | None = None  # [B, H] (lstm)

    @property
    def batch(self) -> int:
        return int(self.xg.shape[0])

    @property
    def steps(self) -> int:
        return int(self.xg.shape[1])

    def result(self, out=None, h_n=None, c_n=None):
        """``(out, h_n)`` or ``(out, h_n, c_n)``: the call's own arrays unless others are given."""
        out = self.out if out is None else out
        h_n = self.h_n if h_n is None else h_n
        if not self.lstm:
            return out, h_n
        return out, h_n, self.c_n if c_n is None else c_n


def prepare(mode, xg, w_hh, scale, b_hh, h0, c0, lengths, reverse, sums=None, *, device: bool = False) -> Recurrence:
    """Check a ``{mode}_recurrence_int8`` call (see the module docstring); allocate its outputs on the
    host unless ``device``."""
    g = GATES[mode]
    if not isinstance(reverse, (bool, np.bool_)):
        raise TypeError(f"reverse must be a bool, got {type(reverse).__name__}")
    xg = _checks.float_array("xg", xg, ndim=3, dtypes=_F32)
    w_hh = _checks.float_array("w_hh", w_hh, ndim=2, dtypes=_I8)
    if w_hh.shape[1] == 0 or w_hh.shape[0] != g * w_hh.shape[1]:
        raise ValueError(f"w_hh must have shape [{g}*H, H] with H > 0, got {list(w_hh.shape)}")
    hidden = int(w_hh.shape[1])
    if hidden > K_MAX:
        raise ValueError(f"w_hh has {hidden} columns; int8 products support at most K = {K_MAX} (int32 sums)")
    gh = g * hidden
    batch, steps, _ = xg.shape
    _checks.check_shape("xg", xg, (None, None, gh), what=f"[B, T, {g}*H], H={hidden} from w_hh")
    scale = _checks.float_array("scale", scale, ndim=1, dtypes=_F32)
    _checks.check_shape("scale", scale, (gh,), what="one float32 scale per row of w_hh")
    if b_hh is not None:
        b_hh = _checks.float_array("b_hh", b_hh, ndim=1, dtypes=_F32)
        _checks.check_shape("b_hh", b_hh, (gh,), what=f"[{g}*H]")
    states = []
    for name, s in (("h0", h0), ("c0", c0)):
        if s is not None:
            s = _checks.float_array(name, s, ndim=2, dtypes=_F32)
            _checks.check_shape(name, s, (batch, hidden), what="[B of xg, H]")
        states.append(s)
    if lengths is None:
        lens = np.full(batch, steps, dtype=np.int64)
    else:
        lens = _checks.lengths_array("lengths", lengths, batch, steps)
    if sums is not None:
        if not isinstance(sums, np.ndarray) or sums.dtype != np.int32 or not sums.flags.c_contiguous:
            raise TypeError(f"sums must be a C-contiguous int32 numpy array, got {type(sums).__name__}")
        _checks.check_shape("sums", sums, (steps, batch, gh), what="[T, B, G*H]")
        sums[...] = 0
    r = Recurrence(mode == "lstm", xg, w_hh, scale, b_hh, states[0], states[1], lens, bool(reverse), hidden, sums)
    if not device:
        r.out = np.empty((batch, steps, hidden), np.float32)
        r.h_n = np.empty((batch, hidden), np.float32)
        r.c_n = np.empty((batch, hidden), np.float32) if r.lstm else None
    return r
