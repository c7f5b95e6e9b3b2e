"""gru / lstm / gru_cell / lstm_cell: argument checks, parameter layout and output allocation.

Layout and gate order follow PyTorch (``nn.GRU`` / ``nn.LSTM`` / ``nn.GRUCell`` / ``nn.LSTMCell``):

- GRU gates r, z, n (``G = 3``): ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``,
  ``h' = (1 - z) * n + z * h``;
- LSTM gates i, f, g, o (``G = 4``): ``c' = f * c + i * g``, ``h' = o * tanh(c')``.

Sequence ops take ``params``, a dict keyed exactly like ``nn.GRU/nn.LSTM.state_dict()``:
``weight_ih_l{k}`` ``[G*H, I_k]``, ``weight_hh_l{k}`` ``[G*H, H]``, ``bias_ih_l{k}`` / ``bias_hh_l{k}``
``[G*H]``, plus the ``_reverse`` copies for the backward direction. ``I_0`` is x's feature size and
``I_k = D*H`` above. Number of layers, bidirectionality and biases are read from the keys.

``lengths`` ``[B]`` gives packed-sequence semantics: row b runs its recurrence over its first
``lengths[b]`` steps only (the reverse direction starts at step ``lengths[b] - 1``), its final state
is the state after its own last step, and output positions ``t >= lengths[b]`` are zero. A length of 0
is allowed: that row's output is all zero and its final state is its initial state.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from seqjit.kernels import _checks

GATES = {"gru": 3, "lstm": 4}
_KEY = re.compile(r"^(weight|bias)_(ih|hh)_l(\d+)(_reverse)?$")


@dataclass
class Direction:
    """The weights of one layer and direction (biases None when the model has none)."""

    w_ih: np.ndarray  # [G*H, I_k]
    w_hh: np.ndarray  # [G*H, H]
    b_ih: np.ndarray | None  # [G*H]
    b_hh: np.ndarray | None  # [G*H]


@dataclass
class Sequence:
    """A checked gru/lstm call. Arrays are time-major; ``output`` etc. are None when ``device``."""

    mode: str
    x: np.ndarray  # [T, B, I] time-major (a device array on the cuda backend)
    layers: list  # layers[k][d] -> Direction
    h0: np.ndarray | None  # [L*D, B, H]
    c0: np.ndarray | None  # [L*D, B, H] (lstm)
    lengths: np.ndarray  # int64 [B]
    full: bool  # every row runs all T steps
    hidden: int
    batch_first: bool
    output: np.ndarray | None = None  # [T, B, D*H]
    h_n: np.ndarray | None = None  # [L*D, B, H]
    c_n: np.ndarray | None = None  # [L*D, B, H] (lstm)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_directions(self) -> int:
        return len(self.layers[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.x.shape)

    def order(self) -> np.ndarray:
        """Batch rows sorted by length, longest first (stable): active rows form a prefix each step."""
        return np.ascontiguousarray(np.argsort(-self.lengths, kind="stable"), dtype=np.int64)

    def result(self):
        """``(output, h_n)`` for gru, ``(output, (h_n, c_n))`` for lstm; batch-first output if asked."""
        out = self.output
        if self.batch_first:
            out = np.ascontiguousarray(out.transpose(1, 0, 2))
        return (out, self.h_n) if self.mode == "gru" else (out, (self.h_n, self.c_n))


def _float(name, a, dtype):
    a = _checks.float_array(name, a)
    if np.dtype(a.dtype) != dtype:
        raise TypeError(f"{name} must have dtype {dtype} like x, got {a.dtype}")
    return a


def parse_params(params, mode: str, input_size: int, dtype, *, device: bool = False) -> tuple[list, int]:
    """Check ``params`` (a state_dict-like mapping); return ``(layers[k][d] -> Direction, H)``."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict of arrays keyed like nn.{mode.upper()}.state_dict(), got {type(params).__name__}")
    gates = GATES[mode]
    found = {}
    for key in params:
        m = _KEY.match(key) if isinstance(key, str) else None
        if m is None:
            raise ValueError(
                f"params has unknown key {key!r}; expected weight_ih_l<k>, weight_hh_l<k>, bias_ih_l<k>, "
                f"bias_hh_l<k> (optionally with _reverse); projections (weight_hr) are not supported"
            )
        found[key] = m
    if "weight_hh_l0" not in params:
        raise ValueError(f"params is missing 'weight_hh_l0' (expected shape [{gates}*H, H])")
    num_layers = 1 + max(int(m.group(3)) for m in found.values())
    dirs = 2 if any(m.group(4) for m in found.values()) else 1
    has_bias = any(m.group(1) == "bias" for m in found.values())
    w = _float("params['weight_hh_l0']", params["weight_hh_l0"], dtype)
    if len(w.shape) != 2 or w.shape[0] != gates * w.shape[1] or w.shape[1] == 0:
        raise ValueError(f"params['weight_hh_l0'] must have shape [{gates}*H, H] with H > 0, got {list(w.shape)}")
    hidden = int(w.shape[1])
    gh = gates * hidden
    layers = []
    for k in range(num_layers):
        layer = []
        for d in range(dirs):
            sfx = f"_l{k}" + ("_reverse" if d else "")
            in_k = input_size if k == 0 else dirs * hidden
            what_in = "input_size of x" if k == 0 else f"{dirs}*H, the layer below's output"
            expect = {
                "weight_ih": ((gh, in_k), f"[{gates}*H, {what_in}]"),
                "weight_hh": ((gh, hidden), f"[{gates}*H, H]"),
            }
            if has_bias:
                expect["bias_ih"] = ((gh,), f"[{gates}*H]")
                expect["bias_hh"] = ((gh,), f"[{gates}*H]")
            arrays = {}
            for base, (shape, what) in expect.items():
                key = base + sfx
                if key not in params:
                    raise ValueError(f"params is missing {key!r} (expected shape {list(shape)}: {what}, H={hidden})")
                a = _float(f"params[{key!r}]", params[key], dtype)
                _checks.check_shape(f"params[{key!r}]", a, shape, what=f"{what}, H={hidden}")
                arrays[base] = a
            layer.append(Direction(arrays["weight_ih"], arrays["weight_hh"], arrays.get("bias_ih"), arrays.get("bias_hh")))
        layers.append(layer)
    return layers, hidden


def _state(name, a, shape, dtype, device):
    if a is None:
        return None
    a = _float(name, a, dtype)
    _checks.check_shape(name, a, shape, what="[num_layers*num_directions, batch, hidden]")
    return a


def prepare_sequence(mode, x, params, state0, lengths, batch_first, *, device: bool = False) -> Sequence:
    """Check a gru (``state0`` = h0) or lstm (``state0`` = (h0, c0)) call and allocate its outputs.

    With ``device=True`` (cuda backend) x and the weights may be device arrays, x is not made
    time-major and nothing is allocated: the backend transposes and allocates on the device.
    """
    x = _checks.float_array("x", x, ndim=3)
    if not isinstance(batch_first, (bool, np.bool_)):
        raise TypeError(f"batch_first must be a bool, got {type(batch_first).__name__}")
    dtype = np.dtype(x.dtype)
    if batch_first:
        batch, steps, features = x.shape
        if not device:
            x = np.ascontiguousarray(x.transpose(1, 0, 2))
    else:
        steps, batch, features = x.shape
    layers, hidden = parse_params(params, mode, int(features), dtype, device=device)
    nld = len(layers) * len(layers[0])
    sshape = (nld, batch, hidden)
    if mode == "gru":
        h0, c0 = _state("h0", state0, sshape, dtype, device), None
    else:
        if state0 is None:
            h0 = c0 = None
        else:
            if not isinstance(state0, (tuple, list)) or len(state0) != 2:
                raise TypeError(f"state0 must be a (h0, c0) pair of arrays [{nld}, {batch}, {hidden}], got {type(state0).__name__}")
            h0 = _state("state0[0] (h0)", state0[0], sshape, dtype, device)
            c0 = _state("state0[1] (c0)", state0[1], sshape, dtype, device)
            if h0 is None or c0 is None:
                raise TypeError("state0 must hold two arrays (h0, c0), not None")
    if lengths is None:
        lens = np.full(batch, steps, dtype=np.int64)
    else:
        lens = _checks.lengths_array("lengths", lengths, batch, steps)
    full = bool(np.all(lens == steps))
    seq = Sequence(mode, x, layers, h0, c0, lens, full, hidden, bool(batch_first))
    if not device:
        seq.output = np.empty((steps, batch, len(layers[0]) * hidden), dtype)
        seq.h_n = np.empty(sshape, dtype)
        seq.c_n = np.empty(sshape, dtype) if mode == "lstm" else None
    return seq


@dataclass
class Cell:
    """A checked gru_cell / lstm_cell call (biases and states None when not given)."""

    x: np.ndarray  # [B, I]
    h: np.ndarray | None  # [B, H]
    c: np.ndarray | None  # [B, H] (lstm)
    w_ih: np.ndarray  # [G*H, I]
    w_hh: np.ndarray  # [G*H, H]
    b_ih: np.ndarray | None
    b_hh: np.ndarray | None
    hidden: int
    h_out: np.ndarray | None = None  # [B, H]
    c_out: np.ndarray | None = None  # [B, H] (lstm)


def prepare_cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, out, *, device: bool = False) -> Cell:
    """Check a gru_cell (``c`` None) / lstm_cell call; allocate h' (``out`` when given) and c'."""
    gates = GATES[mode]
    x = _checks.float_array("x", x, ndim=2)
    dtype = np.dtype(x.dtype)
    batch, features = x.shape
    w_hh = _float("w_hh", w_hh, dtype)
    if len(w_hh.shape) != 2 or w_hh.shape[0] != gates * w_hh.shape[1] or w_hh.shape[1] == 0:
        raise ValueError(f"w_hh must have shape [{gates}*H, H] with H > 0, got {list(w_hh.shape)}")
    hidden = int(w_hh.shape[1])
    gh = gates * hidden
    w_ih = _float("w_ih", w_ih, dtype)
    _checks.check_shape("w_ih", w_ih, (gh, features), what=f"[{gates}*H, input_size of x], H={hidden}")
    biases = []
    for name, b in (("b_ih", b_ih), ("b_hh", b_hh)):
        if b is not None:
            b = _float(name, b, dtype)
            _checks.check_shape(name, b, (gh,), what=f"[{gates}*H], H={hidden}")
        biases.append(b)
    states = []
    for name, s in (("h", h), ("c", c)):
        if s is not None:
            s = _float(name, s, dtype)
            _checks.check_shape(name, s, (batch, hidden), what="[batch of x, H]")
        states.append(s)
    cell = Cell(x, states[0], states[1], w_ih, w_hh, biases[0], biases[1], hidden)
    if not device:
        cell.h_out = _checks.out_array("out", out, (batch, hidden), dtype)
        cell.c_out = np.empty((batch, hidden), dtype) if mode == "lstm" else None
    return cell


def gate_biases(w_hh, b_ih, b_hh, dtype):
    """``(bx, bh)`` ``[G*H]`` each, zeros when the model has no biases (the kernels add both)."""
    gh = w_hh.shape[0]
    bx = np.zeros(gh, dtype) if b_ih is None else np.ascontiguousarray(b_ih)
    bh = np.zeros(gh, dtype) if b_hh is None else np.ascontiguousarray(b_hh)
    return bx, bh
