"""The context gate graph piece (:mod:`seqjit.models.rnn_context_gate`) against the gates of Tu et
al. 2017 written out in PyTorch (OpenNMT-py's ``SourceContextGate``/``TargetContextGate``/
``BothContextGate``: sigmoid gate, source and target projections), under the Python replay and the
native one with the default passes (which merge linears reading one input), every node native. The
whole models are checked against OpenNMT-py's own in ``test_opennmt_rnn.py`` (toolkit marker)."""
import numpy as np
import pytest
import torch

from seqjit.graph import Executor, GraphBuilder
from seqjit.models.rnn_context_gate import KINDS, PREFIX, apply_gate

X, HD, AO, B = 7, 5, 6, 4


def weights(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"gate": (AO, X + HD + AO), "source_proj": (AO, AO), "target_proj": (AO, X + HD)}
    w = {}
    for name, shape in shapes.items():
        w[f"{PREFIX}.{name}.weight"] = rng.standard_normal(shape).astype(np.float32)
        w[f"{PREFIX}.{name}.bias"] = rng.standard_normal(shape[0]).astype(np.float32)
    return w


def reference(w, kind, x, h, att):
    t = {k: torch.from_numpy(v) for k, v in w.items()}
    x, h, att = (torch.from_numpy(a) for a in (x, h, att))

    def lin(name, v):
        return v @ t[f"{PREFIX}.{name}.weight"].T + t[f"{PREFIX}.{name}.bias"]

    z = torch.sigmoid(lin("gate", torch.cat([x, h, att], 1)))
    source, target = lin("source_proj", att), lin("target_proj", torch.cat([x, h], 1))
    out = {"source": target + z * source, "target": z * target + source, "both": (1 - z) * target + z * source}[kind]
    return torch.tanh(out).numpy()


@pytest.mark.parametrize("replay", ["python", "native"])
@pytest.mark.parametrize("kind", KINDS)
def test_gate_equals_the_rule(kind, replay):
    w = weights()
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal((B, d)).astype(np.float32) for n, d in (("x", X), ("h", HD), ("att", AO))}
    g = GraphBuilder("gate")
    g.output(apply_gate(g, w, kind, *(g.input(n, dtype="float", ndim=2) for n in ("x", "h", "att"))), name="y")
    ex = Executor(g.build(), replay=replay)
    got = ex.run(feeds)["y"]
    np.testing.assert_allclose(got, reference(w, kind, feeds["x"], feeds["h"], feeds["att"]), rtol=1e-5, atol=1e-5)
    if replay == "native":
        plan = ex.plan_for(feeds)
        assert plan.native and all(k == "native" for _, _, k in plan.native.low.labels), plan.native.low.labels


def test_the_rules_differ():
    """The three rules give different vectors on the same inputs (a rule swapped would show)."""
    w = weights()
    rng = np.random.default_rng(1)
    x, h, att = (rng.standard_normal((B, d)).astype(np.float32) for d in (X, HD, AO))
    outs = [reference(w, k, x, h, att) for k in KINDS]
    assert min(np.abs(a - b).max() for i, a in enumerate(outs) for b in outs[i + 1:]) > 0.1
