"""Context gates (Tu et al. 2017, "Context Gates for Neural Machine Translation"; OpenNMT-py's
``-context_gate source|target|both``, ``onmt/modules/gate.py``) for an ``attention_seq2seq`` model
with an attentional layer after the step (``attention_query="current"``).

The gate replaces the attentional vector h~ [B, Ao] (what the output layer reads and, with input
feeding, the next step's feed) by::

    z      = sigmoid(G [x; h; h~] + b_g)                    x: the RNN's input [e; feed] or e
    source = S h~ + b_s,   target = T [x; h] + b_t          h: the new top decoder state
    "source": tanh(target + z * source)
    "target": tanh(z * target + source)
    "both":   tanh((1 - z) * target + z * source)

Weights (X = the RNN input width, Hd, Ao as in ``attention_seq2seq``)::

    decoder.context_gate.gate.weight        [Ao, X + Hd + Ao], .gate.bias        [Ao]
    decoder.context_gate.source_proj.weight [Ao, Ao],          .source_proj.bias [Ao]
    decoder.context_gate.target_proj.weight [Ao, X + Hd],      .target_proj.bias [Ao]

The graph uses only existing native ops (linear, mul, add, tanh): with z = (1 + t) / 2,
t = tanh(a / 2) for a = G [x; h; h~] + b_g (sigmoid's identity), each rule is tanh(P + t * Q) with
P and Q linear in [x; h; h~]::

    "source": P = target + source / 2,    Q = source / 2
    "target": P = target / 2 + source,    Q = target / 2
    "both":   P = (target + source) / 2,  Q = (source - target) / 2

so the gate is three linears (halved gate weights with tanh and P over [x; h; h~], Q over its own
input: :func:`folded`), one mul, one add and one tanh; the folded matrices are built once, when the
graph is built.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph.ops import TensorSpec

KINDS = ("source", "target", "both")
PREFIX = "decoder.context_gate"
#: (P's target part, P's source part, Q's target part, Q's source part) by rule
_FOLDS = {"source": (1.0, 0.5, 0.0, 0.5), "target": (0.5, 1.0, 0.5, 0.0), "both": (0.5, 0.5, -0.5, 0.5)}


def gate_spec(rnn_input: int, hidden: int, attentional: int, dtype) -> dict:
    """The gate's weights (module docstring) for RNN input width X, top state Hd and h~ width Ao."""
    X, Hd, Ao, dt = rnn_input, hidden, attentional, np.dtype(dtype)
    return {f"{PREFIX}.gate.weight": TensorSpec((Ao, X + Hd + Ao), dt), f"{PREFIX}.gate.bias": TensorSpec((Ao,), dt),
            f"{PREFIX}.source_proj.weight": TensorSpec((Ao, Ao), dt), f"{PREFIX}.source_proj.bias": TensorSpec((Ao,), dt),
            f"{PREFIX}.target_proj.weight": TensorSpec((Ao, X + Hd), dt),
            f"{PREFIX}.target_proj.bias": TensorSpec((Ao,), dt)}


def folded(weights: dict, kind: str) -> dict:
    """name -> (the input it reads, weight, bias) of the graph's three linears for ``kind``'s rule
    (module docstring): ``half_gate`` (G / 2, b_g / 2) and ``P`` read [x; h; h~]; ``Q`` reads h~
    ("source"), [x; h] ("target") or [h~; x; h] ("both"): its own input, so the passes do not
    merge it with ``P`` into one product whose column slices the native mul/add cannot read."""
    G, bg = weights[f"{PREFIX}.gate.weight"], weights[f"{PREFIX}.gate.bias"]
    S, bs = weights[f"{PREFIX}.source_proj.weight"], weights[f"{PREFIX}.source_proj.bias"]
    T, bt = weights[f"{PREFIX}.target_proj.weight"], weights[f"{PREFIX}.target_proj.bias"]
    pt, ps, qt, qs = (np.asarray(f, G.dtype) for f in _FOLDS[kind])
    half = np.asarray(0.5, G.dtype)
    P = (np.ascontiguousarray(np.concatenate([T * pt, S * ps], axis=1)), bt * pt + bs * ps)
    Q = {"source": ("attended", S * qs, bs * qs), "target": ("target", T * qt, bt * qt),
         "both": ("both", np.ascontiguousarray(np.concatenate([S * qs, T * qt], axis=1)), bs * qs + bt * qt)}[kind]
    return {"half_gate": ("all", G * half, bg * half), "P": ("all", *P), "Q": Q}


def apply_gate(g, weights: dict, kind: str, x, top, attended):
    """The gated attentional vector [..., Ao] from the RNN input x, the new top state and h~."""
    inputs = {"attended": attended}
    inputs["all"] = g.op("concat", x, top, attended, axis=-1, name=f"{PREFIX}.input")
    if kind == "target":
        inputs["target"] = g.op("concat", x, top, axis=-1, name=f"{PREFIX}.target_input")
    if kind == "both":
        inputs["both"] = g.op("concat", attended, x, top, axis=-1, name=f"{PREFIX}.q_input")
    parts = {}
    for name, (source, w, b) in folded(weights, kind).items():
        parts[name] = g.op("linear", inputs[source], g.constant(f"{PREFIX}.{name}.weight", w),
                           g.constant(f"{PREFIX}.{name}.bias", b), activation="tanh" if name == "half_gate" else None,
                           name=f"{PREFIX}.{name}")
    scaled = g.op("mul", parts["half_gate"], parts["Q"], name=f"{PREFIX}.tQ")
    return g.op("tanh", g.op("add", parts["P"], scaled, name=f"{PREFIX}.P_tQ"), name=PREFIX)


__all__ = ["KINDS", "apply_gate", "folded", "gate_spec"]
