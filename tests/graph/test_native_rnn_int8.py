"""Native replay of gru/lstm_recurrence_int8 (OP_RNN_INT8) against the NumPy reference kernel: one
node lowered with no Python callback, packed rows in both directions, given or zero initial states,
and input projections read through a view (the slice of a merged linear_int8)."""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder
from seqjit.kernels.linear_int8.reference import quantize_int8

rng = np.random.default_rng(11)
TOL = dict(rtol=1e-5, atol=1e-6)


def f32(*shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


@pytest.mark.parametrize("mode", ["gru", "lstm"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("b,t,states,merged", [(1, 1, True, False), (3, 6, False, False), (6, 4, True, True)])
def test_recurrence_int8_native_equals_reference(mode, reverse, b, t, states, merged):
    h, g = 16, 3 if mode == "gru" else 4
    qw, ws = quantize_int8(f32(g * h, h, scale=0.4))
    bias = f32(g * h)
    feeds = {"xg": f32(b, t, g * h + (5 if merged else 0)), "lengths": np.array([t, 1, 0, t - 1, 2, t][:b], np.int64)}
    if states:
        feeds.update(h0=f32(b, h), c0=f32(b, h))
    builder = GraphBuilder("one")
    xg = builder.input("xg", dtype="float", ndim=3)
    if merged:
        xg = builder.op("slice_last", xg, start=5, stop=5 + g * h)  # rows g*h + 5 floats apart
    lengths = builder.input("lengths", dtype="int", ndim=1)
    h0 = builder.input("h0", dtype="float", ndim=2) if states else None
    c0 = builder.input("c0", dtype="float", ndim=2) if states and mode == "lstm" else None
    weights = [builder.constant("w", qw), builder.constant("s", ws), builder.constant("b", bias)]
    if mode == "gru":
        outs = builder.op("gru_recurrence_int8", xg, h0, lengths, *weights, reverse=reverse, outputs=2)
    else:
        outs = builder.op("lstm_recurrence_int8", xg, h0, c0, lengths, *weights, reverse=reverse, outputs=3)
    for name, o in zip(("out", "h_n", "c_n"), outs):
        builder.output(o, name=name)
    if mode == "gru":
        feeds.pop("c0", None)
    ex = Executor(builder.build(), passes=(), replay="native")
    got = ex.run(feeds)
    plan = ex.plan_for(feeds)
    assert plan.native and all(kind == "native" for _, _, kind in plan.native.low.labels), plan.native.low.labels
    xv = feeds["xg"][..., 5:] if merged else feeds["xg"]
    kw = dict(h0=feeds.get("h0"), lengths=feeds["lengths"], reverse=reverse)
    if mode == "lstm":
        kw["c0"] = feeds.get("c0")
    want = kernels.get(f"{mode}_recurrence_int8", "reference")(xv, qw, ws, bias, **kw)
    for name, value in zip(("out", "h_n", "c_n"), want):
        np.testing.assert_allclose(got[name], value, **TOL, err_msg=name)
    again = ex.run({k: v.copy() for k, v in feeds.items()})  # inputs at new addresses: pointers patched
    for name in got:
        np.testing.assert_array_equal(again[name], got[name])
