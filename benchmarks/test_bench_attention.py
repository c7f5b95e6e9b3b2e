"""attention benchmarks: seqjit numba and cython vs torch SDPA, float32, 2 threads, in the same run.

    python -m pytest benchmarks/test_bench_attention.py --benchmark-enable --benchmark-only -q \
        --benchmark-columns=median,iqr,rounds --benchmark-sort=name

Groups: ``attention L=<L> causal=<c>`` (B=1, H=8, D=64), ``attention decode`` (B=16, H=8, Lq=1,
Lk=2048, per-row lengths) and ``attention peak memory L=8192`` (each engine in its own process,
peak extra resident memory of one call in ``extra_info['peak_extra_MB']``; the timing there is the
whole subprocess and means nothing).
"""
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import seqjit
from seqjit import kernels
from seqjit.demos.attention_kernel import run_engine

THREADS = 2
ENGINES = ["numba", "cython", "torch"]


@pytest.fixture(autouse=True)
def _two_threads():
    torch.set_num_threads(THREADS)
    seqjit.set_num_threads(THREADS)


def _engine(name, causal, lengths=None):
    if name == "torch":
        def run(q, k, v):
            mask = None
            if lengths is not None:
                mask = torch.from_numpy(np.arange(k.shape[2])[None, None, None, :] < lengths[:, None, None, None])
            t = [torch.from_numpy(x) for x in (q, k, v)]
            return F.scaled_dot_product_attention(*t, attn_mask=mask, is_causal=causal)
        return run
    f = kernels.get("attention", backend=name)
    return lambda q, k, v: f(q, k, v, causal=causal, lengths=lengths)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("L", [512, 2048, 8192])
def test_attention(benchmark, engine, causal, L):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 8, L, 64), dtype=np.float32) for _ in range(3))
    run = _engine(engine, causal)
    run(q, k, v)  # compile / warm up
    benchmark.group = f"attention L={L} causal={causal}"
    benchmark.extra_info.update(engine=engine, L=L, causal=causal, threads=THREADS)
    if L >= 8192:
        benchmark.pedantic(run, args=(q, k, v), rounds=3, iterations=1)
    else:
        benchmark(run, q, k, v)


@pytest.mark.parametrize("engine", ENGINES)
def test_attention_decode(benchmark, engine):
    """One decode step: B=16 rows, H=8, one query over a 2048-key cache, per-row lengths."""
    rng = np.random.default_rng(0)
    B, H, Lk, D = 16, 8, 2048, 64
    q = rng.standard_normal((B, H, 1, D), dtype=np.float32)
    k, v = (rng.standard_normal((B, H, Lk, D), dtype=np.float32) for _ in range(2))
    lengths = rng.integers(Lk // 2, Lk + 1, B)
    run = _engine(engine, False, lengths)
    run(q, k, v)
    benchmark.group = "attention decode B=16 H=8 Lq=1 Lk=2048"
    benchmark.extra_info.update(engine=engine, threads=THREADS)
    benchmark(run, q, k, v)


@pytest.mark.parametrize("engine", ["numba", "cython", "torch", "naive"])
def test_attention_peak_memory(benchmark, engine):
    """Peak extra resident memory of one warm call at L=8192 (non-causal), each engine in its own process."""
    result = {}

    def measure():
        name = "attention_peers:torch_sdpa" if engine == "torch" else engine  # the peer lives in benchmarks/
        result.update(run_engine(name, 8192, 8, 64, False, threads=THREADS, path=str(Path(__file__).parent)))

    benchmark.group = "attention peak memory L=8192"
    benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update(engine=engine, peak_extra_MB=result["peak_mb"], warm_s=result["warm_s"])
    print(f"\n{engine}: peak extra {result['peak_mb']:.0f} MB, warm call {result['warm_s']:.3f} s")
