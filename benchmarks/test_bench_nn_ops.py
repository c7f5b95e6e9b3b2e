"""Benchmarks of the kernels around attention and RNNs: layer_norm, linear (decode and encoder
shapes, fused activation, both weight layouts), gelu, embedding and softmax / log_softmax; seqjit's
numba and cython backends vs the torch op, float32, 2 threads, in the same run.

    python -m pytest benchmarks/test_bench_nn_ops.py --benchmark-enable --benchmark-only -q \
        --benchmark-columns=median,iqr,rounds --benchmark-sort=name

Each ``benchmark.group`` is one op at one shape, so the ratios against ``torch`` read off one group.
Results: benchmarks/results/nn_ops.md.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import seqjit
from seqjit import kernels

THREADS = 2
ENGINES = ["numba", "cython", "torch"]


@pytest.fixture(autouse=True)
def _two_threads():
    torch.set_num_threads(THREADS)
    seqjit.set_num_threads(THREADS)


def _run(benchmark, group, engine, fn, *args, heavy=False, **info):
    fn(*args)  # compile / warm up
    benchmark.group = group
    benchmark.extra_info.update(engine=engine, threads=THREADS, **info)
    if heavy:
        benchmark.pedantic(fn, args=args, rounds=5, iterations=1, warmup_rounds=1)
    else:
        benchmark(fn, *args)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("rows, d", [(1, 512), (16, 1024), (5000, 512)])
def test_layer_norm(benchmark, engine, rows, d):
    x, w, b = _rand(rows, d), _rand(d, seed=1), _rand(d, seed=2)
    if engine == "torch":
        t = [torch.from_numpy(a) for a in (x, w, b)]
        fn, args = (lambda x, w, b: F.layer_norm(x, (d,), w, b)), t
    else:
        fn, args = kernels.get("layer_norm", backend=engine), (x, w, b)
    _run(benchmark, f"layer_norm {rows}x{d}", engine, fn, *args)


LINEAR_SHAPES = [  # (M, K, N, activation): decode (M = 1..16) and encoder (M = 320..5000) shapes
    (1, 512, 512, None),
    (1, 512, 2048, "gelu"),
    (1, 2048, 2048, None),
    (16, 1024, 1024, "relu"),
    (320, 512, 2048, "gelu"),
    (5000, 512, 2048, "gelu"),
]
TORCH_ACT = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu}


@pytest.mark.parametrize("engine", ["numba/out_in", "numba/in_out", "cython/out_in", "cython/in_out", "torch"])
@pytest.mark.parametrize("m, k, n, activation", LINEAR_SHAPES)
def test_linear(benchmark, engine, m, k, n, activation):
    x, w, b = _rand(m, k), _rand(n, k, seed=1) / np.float32(np.sqrt(k)), _rand(n, seed=2)
    if engine == "torch":
        act = TORCH_ACT[activation]
        fn, args = (lambda x, w, b: act(F.linear(x, w, b))), [torch.from_numpy(a) for a in (x, w, b)]
    else:
        backend, layout = engine.split("/")
        f = kernels.get("linear", backend=backend)
        wl = w if layout == "out_in" else np.ascontiguousarray(w.T)
        out = np.empty((m, n), np.float32)

        def fn(x, w, b):
            return f(x, w, b, activation=activation, weight_layout=layout, out=out)

        args = (x, wl, b)
    _run(benchmark, f"linear {m}x{k}x{n} {activation}", engine, fn, *args, heavy=m >= 5000, flops=2 * m * k * n)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", [(16, 2048), (512, 2048)])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(benchmark, engine, shape, approximate):
    x = _rand(*shape) * 3
    if engine == "torch":
        fn, args = (lambda t: F.gelu(t, approximate=approximate)), (torch.from_numpy(x),)
    else:
        f = kernels.get("gelu", backend=engine)
        fn, args = (lambda a: f(a, approximate=approximate)), (x,)
    _run(benchmark, f"gelu {approximate} {shape[0]}x{shape[1]}", engine, fn, *args)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("ids_shape", [(16, 1), (32, 100)], ids=["decode16x1", "encode32x100"])
def test_embedding(benchmark, engine, ids_shape):
    vocab, d = 32000, 512
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, ids_shape)
    table = _rand(vocab, d)
    pos = kernels.get("sinusoidal_positions", backend="reference")(ids_shape[1], d, layout="halves")
    scale = math.sqrt(d)
    if engine == "torch":
        fn = lambda i, t, p: F.embedding(i, t) * scale + p  # noqa: E731
        args = (torch.from_numpy(ids), torch.from_numpy(table), torch.from_numpy(pos))
    else:
        f = kernels.get("embedding", backend=engine)
        fn, args = (lambda i, t, p: f(i, t, scale=scale, positions=p)), (ids, table, pos)
    _run(benchmark, f"embedding+positions {ids_shape[0]}x{ids_shape[1]}x{d}", engine, fn, *args)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "op, shape",
    [("softmax", (64, 1024)), ("softmax", (16, 8192)), ("softmax", (4, 32768)), ("softmax", (1, 32000)),
     ("log_softmax", (4, 32768)), ("log_softmax", (1, 32000))],
)
def test_softmax(benchmark, engine, op, shape):
    x = _rand(*shape) * 4
    if engine == "torch":
        fn, args = (lambda t: getattr(torch, op)(t, dim=-1)), (torch.from_numpy(x),)
    else:
        fn, args = kernels.get(op, backend=engine), (x,)
    _run(benchmark, f"{op} {shape[0]}x{shape[1]}", engine, fn, *args)


@pytest.mark.parametrize("engine", ENGINES)
def test_softmax_masked(benchmark, engine):
    x = _rand(64, 1024) * 4
    mask = np.random.default_rng(1).random((64, 1024)) > 0.2
    if engine == "torch":
        t, tm = torch.from_numpy(x), torch.from_numpy(~mask)
        fn, args = (lambda t, tm: torch.softmax(t.masked_fill(tm, float("-inf")), dim=-1)), (t, tm)
    else:
        f = kernels.get("softmax", backend=engine)
        fn, args = f, (x, mask)
    _run(benchmark, "softmax masked 64x1024", engine, fn, *args)
