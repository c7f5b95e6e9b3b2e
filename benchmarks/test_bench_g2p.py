"""The bundled G2P models: seqjit vs the same weights as PyTorch modules, greedy, 2 threads, same run.

    python -m pytest benchmarks/test_bench_g2p.py --benchmark-enable --benchmark-only -q \
        --benchmark-columns=median,iqr,rounds --benchmark-sort=name

Groups ``<model> batch=<B>``: 64 test-split words decoded in calls of B words.
"""
import seqjit  # first: its OMP_WAIT_POLICY=PASSIVE must reach the OpenMP runtime before torch loads one

import pytest
import torch
from seqjit.g2p import BUNDLED, G2P
from seqjit.g2p.speed import _torch_runner, _words

THREADS = 2
WORDS = 64


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(THREADS)
    seqjit.set_num_threads(THREADS)


@pytest.mark.parametrize("engine", ["seqjit", "pytorch"])
@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("name", BUNDLED)
def test_g2p(benchmark, name, batch, engine):
    words = _words(WORDS)
    run_batch = G2P(name).predict if engine == "seqjit" else _torch_runner(name)

    def run():
        for i in range(0, len(words), batch):
            run_batch(words[i : i + batch])

    run()
    benchmark.group = f"{name} batch={batch}"
    benchmark.extra_info.update(engine=engine, threads=THREADS, words=WORDS)
    benchmark(run)
