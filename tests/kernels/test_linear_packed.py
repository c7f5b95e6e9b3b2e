"""The native linear on weights packed in panels (kernels/linear/native_packed.h, packed.py), for
products of more than 4 rows: every instruction-set variant against the NumPy reference over each
row-block split, partial panels, K cut in blocks and both weight layouts; columns split over two
threads equal one thread bit for bit."""
import numpy as np
import pytest

import seqjit
from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder, _native_vm
from seqjit.kernels.linear.packed import PANEL, pack_panels, panels, unpack_panels

TOL = dict(rtol=2e-5, atol=2e-5)


def _run(x, w, b, act, layout):
    g = GraphBuilder("one")
    g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", w), g.constant("b", b) if b is not None else None,
                  activation=act, weight_layout=layout), name="y")
    graph = g.build()
    ex = Executor(graph, passes=(), replay="native")
    y = ex.run({"x": x})["y"]
    plan = ex.plan_for({"x": x})
    assert plan.native and all(kind == "native" for _, _, kind in plan.native.low.labels)
    return y, graph, ex


@pytest.mark.parametrize("n", [1, 31, 32, 33, 70, 96, 130])
@pytest.mark.parametrize("layout", ["out_in", "in_out"])
def test_pack_round_trip(n, layout):
    rng = np.random.default_rng(n)
    w = rng.standard_normal((n, 37)).astype(np.float32)
    packed = pack_panels(w if layout == "out_in" else np.ascontiguousarray(w.T), layout)
    assert packed.shape == (panels(n), 37, PANEL) and packed.ctypes.data % 64 == 0
    np.testing.assert_array_equal(unpack_panels(packed, n), w)
    assert not packed.transpose(0, 2, 1).reshape(-1, 37)[n:].any()  # columns past N are zero


# M: every row-block split of the 12-row (AVX-512) and 6-row (AVX2, baseline) tiles, from the first
# packed row count (5) up; K: 1100 and 2049 are cut in blocks (over 1024), 1 and 37 are short
@pytest.mark.parametrize("m", [5, 6, 7, 11, 12, 13, 16, 19, 24, 25, 37, 64])
@pytest.mark.parametrize("k,n", [(37, 33), (1, 70), (128, 96), (64, 1), (1100, 40), (2049, 65), (200, 31)])
def test_packed_matches_reference(isa, m, k, n):
    rng = np.random.default_rng(m * 1000 + k + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    for i, (layout, act) in enumerate([("out_in", None), ("in_out", "gelu")]):
        w = (0.2 * rng.standard_normal((n, k) if layout == "out_in" else (k, n))).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32) if i == 0 else None
        y, graph, _ = _run(x, w, b, act, layout)
        assert "w" in graph.__dict__.get("_native_packed", {}), "the product did not take the packed path"
        ref = kernels.get("linear", "reference")(x, w, b, activation=act, weight_layout=layout)
        np.testing.assert_allclose(y, ref, **TOL)


def test_rows_further_apart_than_k(isa):
    """x rows ldx = 160 apart (the first 80 of each row: a view)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((13, 160)).astype(np.float32)
    w = (0.2 * rng.standard_normal((50, 80))).astype(np.float32)
    g = GraphBuilder("strided")
    xi = g.op("slice_last", g.input("x", dtype="float"), start=0, stop=80)
    g.output(g.op("linear", xi, g.constant("w", w)), name="y")
    graph = g.build()
    y = Executor(graph, passes=(), replay="native").run({"x": x})["y"]
    assert "w" in graph.__dict__.get("_native_packed", {})
    np.testing.assert_allclose(y, x[:, :80] @ w.T, **TOL)


# from 72 rows (native_packed_body.h: SJ_PK_PACK_MIN_ROWS) and 2 MB of W a thread (panels x K >= 16384)
# x is packed first, in the thread's scratch or, without it, block by block on the stack with K in
# blocks of 256: both against the reference, and equal (and to the unpacked path below 72 rows)
@pytest.mark.parametrize("m,k,n", [(72, 512, 1024), (80, 512, 1100), (97, 600, 1057), (128, 1100, 1040),
                                   (75, 600, 2049), (64, 1100, 1040)])
def test_packed_x_with_and_without_scratch(isa, m, k, n):
    rng = np.random.default_rng(m + k + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (0.2 * rng.standard_normal((n, k))).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ref = kernels.get("linear", "reference")(x, w, b)
    _, graph, ex = _run(x, w, b, None, "out_in")
    assert "w" in graph.__dict__.get("_native_packed", {}), "the product did not take the packed path"
    got = {}
    before = seqjit.get_num_threads()
    try:  # at 2 threads each thread has half the panels: packed only for 128 x 1100 x 1040 and 75 x 600 x 2049
        for threads in (1, 2):
            seqjit.set_num_threads(threads)
            for on in (True, False):
                _native_vm.packed_scratch(on)
                _native_vm.team_forgive()
                got[threads, on] = ex.run({"x": x})["y"].copy()
                np.testing.assert_allclose(got[threads, on], ref, **TOL)
    finally:
        _native_vm.packed_scratch(True)
        seqjit.set_num_threads(before)
    for y in got.values():
        np.testing.assert_array_equal(y, got[1, True])


@pytest.mark.parametrize("m,k,n", [(16, 512, 520), (9, 256, 4099), (64, 1100, 200)])
def test_two_threads_equal_one_thread_bit_for_bit(m, k, n):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (0.1 * rng.standard_normal((n, k))).astype(np.float32)
    _, _, ex = _run(x, w, None, None, "out_in")
    before = seqjit.get_num_threads()
    try:
        seqjit.set_num_threads(1)
        one = ex.run({"x": x})["y"].copy()
        seqjit.set_num_threads(2)
        for _ in range(4):  # a program's runs at 2 threads alternate between alone (OpenMP) and the team
            _native_vm.team_forgive()
            np.testing.assert_array_equal(ex.run({"x": x})["y"], one)
    finally:
        seqjit.set_num_threads(before)
    np.testing.assert_allclose(one, x @ w.T, **TOL)


def test_large_packed_weights_share_2mb_aligned_arenas_without_overlap(monkeypatch):
    """Packed weights from ARENA_MIN_BYTES are carved from arenas starting on a 2 MB boundary (what
    the huge-page advice needs), each on a cache line and not overlapping the others; a large one
    gets its own arena; $SEQJIT_PACK_HUGE_PAGES=0 gives ordinary aligned arrays."""
    from seqjit.kernels.linear import packed

    rng = np.random.default_rng(3)
    shapes = [(4, 512, PANEL), (16, 512, PANEL), (1, 8, PANEL), (300, 1024, PANEL)]  # 256 KB, 1 MB, 1 KB, 37.5 MB
    arrays = [packed.packed_empty(s) for s in shapes]
    spans = []
    for a, s in zip(arrays, shapes):
        assert a.shape == s and a.dtype == np.float32 and a.ctypes.data % 64 == 0
        a[...] = rng.standard_normal(s, dtype=np.float32)
        spans.append((a.ctypes.data, a.ctypes.data + a.nbytes))
    for a in arrays[:2]:  # carved from a shared arena (numpy's base: the arena's allocation)
        assert a.base.dtype == np.uint8 and a.base.nbytes >= packed.ARENA_BYTES
    assert arrays[2].base.nbytes < packed.ARENA_MIN_BYTES  # small: ordinary memory
    assert arrays[3].ctypes.data % (2 << 20) == 0  # large: its own arena, from a 2 MB boundary
    spans.sort()
    assert all(hi <= lo for (_, hi), (lo, _) in zip(spans, spans[1:]))
    monkeypatch.setenv("SEQJIT_PACK_HUGE_PAGES", "0")
    plain = packed.packed_empty((16, 512, PANEL))
    assert plain.ctypes.data % 64 == 0 and plain.nbytes == 16 * 512 * PANEL * 4
