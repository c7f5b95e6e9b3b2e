"""linear at decode shapes: seqjit int8 (linear_int8, Cython: AVX512-VNNI here) against seqjit float32
(linear, Cython + BLAS), torch float32 (F.linear) and torch int8 (dynamic quantization, fbgemm: per-row
quantized activations times int8 weights, the closest op-level peer of CTranslate2's int8 GEMM, which
CTranslate2's Python API does not expose); 1 and 2 threads, in the same run.

    python -m pytest benchmarks/test_bench_linear_int8.py --benchmark-enable --benchmark-only -q \
        --benchmark-columns=median,iqr,rounds --benchmark-sort=name

Each ``benchmark.group`` is one shape at one thread count. Shapes: M rows (1: a batch-1 decode step;
16, 64: batched decoding) times [N, K] = 512 x 512 (attention projections of a 512-wide model),
2048 x 512 and 512 x 2048 (its FFN), 58101 x 512 (the opus-mt-en-de output projection).
"""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import seqjit
from seqjit import kernels
from seqjit.kernels.linear_int8.reference import quantize_int8

ENGINES = ["seqjit int8", "seqjit fp32", "torch int8", "torch fp32"]
SHAPES = [(512, 512), (2048, 512), (512, 2048), (58101, 512)]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _torch_int8(w, b):
    layer = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(w))
        layer.bias.copy_(torch.from_numpy(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(layer), {torch.nn.Linear}, dtype=torch.qint8)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("m", [1, 16, 64])
@pytest.mark.parametrize("n, k", SHAPES)
def test_linear_decode_shapes(benchmark, engine, m, n, k, threads):
    torch.set_num_threads(threads)
    seqjit.set_num_threads(threads)
    x, w, b = _rand(m, k), _rand(n, k, seed=1) / np.float32(np.sqrt(k)), _rand(n, seed=2)
    out = np.empty((m, n), np.float32)
    if engine == "seqjit int8":
        qw, scale = quantize_int8(w)
        f = kernels.get("linear_int8", backend="cython")
        fn, args = (lambda x: f(x, qw, scale, b, out=out)), (x,)
    elif engine == "seqjit fp32":
        f = kernels.get("linear", backend="cython")
        fn, args = (lambda x: f(x, w, b, out=out)), (x,)
    elif engine == "torch int8":
        layer = _torch_int8(w, b)
        fn, args = layer, (torch.from_numpy(x),)
    else:
        tw, tb = torch.from_numpy(w), torch.from_numpy(b)
        fn, args = (lambda x: F.linear(x, tw, tb)), (torch.from_numpy(x),)
    with torch.inference_mode():
        fn(*args)  # warm up
        benchmark.group = f"linear {m}x{k} -> {n}, {threads} thread{'s' if threads > 1 else ''}"
        benchmark.extra_info.update(engine=engine, threads=threads, weight_bytes=n * k * (1 if "int8" in engine else 4))
        benchmark(fn, *args)
