"""The native GEMV for "out_in" weights at 1-4 rows (kernels/linear/native_gemv.h): every
instruction-set variant against the NumPy reference over K with and without whole 64-float quads,
odd 16-lane blocks and a scalar tail, N with and without whole pairs of weight rows; and each row of
a 2-4 row product bit for bit the same row computed alone (the one-row and the few-row paths sum
each output in the same four FMA chains), so a decode step's result does not depend on its batch."""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder, kernel_choice

TOL = dict(rtol=2e-5, atol=2e-5)


def _linear(x, w, b):
    g = GraphBuilder("one")
    g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", w),
                  g.constant("b", b) if b is not None else None, weight_layout="out_in"), name="y")
    ex = Executor(g.build(), passes=(), replay="native")
    y = ex.run({"x": x})["y"]
    plan = ex.plan_for({"x": x})
    assert plan.native and all(kind == "native" for _, _, kind in plan.native.low.labels)
    return y


# K: 512 and 128 whole quads of 16-lane blocks, 80 / 96 / 112 one to three blocks past a quad, 37 and
# 200 a scalar tail, 5 no vector block; N: odd and even (pairs of weight rows at 2-4 rows)
@pytest.mark.parametrize("k", [5, 37, 80, 96, 112, 128, 200, 512])
@pytest.mark.parametrize("n", [1, 6, 33])
def test_rows_match_reference_and_one_row_alone(isa, k, n, monkeypatch):
    monkeypatch.setattr(kernel_choice, "choose", lambda *a, **kw: "stored")  # 3-4 rows: not the packed kernel
    rng = np.random.default_rng(k * 100 + n)
    x = rng.standard_normal((4, k)).astype(np.float32)
    w = (0.2 * rng.standard_normal((n, k))).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    alone = np.concatenate([_linear(x[m:m + 1], w, b) for m in range(4)])
    np.testing.assert_allclose(alone, kernels.get("linear", "reference")(x, w, b), **TOL)
    for m in (2, 3, 4):
        np.testing.assert_array_equal(_linear(x[:m], w, b), alone[:m])
