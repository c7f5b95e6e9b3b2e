"""Greedy decoding throughput: seqjit against CTranslate2 and transformers (Marian), and against
PyTorch greedy loops (GRU and Bahdanau RNN seq2seq). Float32, 2 threads, 20-token sources,
exactly 20 generated tokens per source. Run one engine per process (see run.py)::

    python -m pytest benchmarks/decoding/test_bench_generate.py --benchmark-enable --benchmark-only -q -k seqjit

Each test times ``generate`` on the whole batch (pedantic rounds after an untimed warm-up call,
which compiles Numba and makes seqjit's plans) and stores the generated ids in
``extra_info['ids']`` so the driver can check that the engines agree. Rounds: $SEQJIT_BENCH_ROUNDS
(default 10) at batch 1, half as many at batch 16, fewer (at least 3) when they would take more
than BUDGET_S seconds.
"""
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload as w  # noqa: E402

BATCHES = [1, 16]
ROUNDS = int(os.environ.get("SEQJIT_BENCH_ROUNDS", "10"))
BUDGET_S = 10.0  # timed seconds per test at most, as long as it gets 3 rounds
_ENGINES: dict = {}


@pytest.fixture(autouse=True)
def _threads():
    w.set_threads()


def _engine(key, make):
    if key not in _ENGINES:
        _ENGINES[key] = make()
    return _ENGINES[key]


def _bench(benchmark, run, srcs, group, **info):
    batch = len(srcs)
    benchmark.group = group
    benchmark.extra_info.update(info, batch=batch, new_tokens=w.NEW_TOKENS, src_len=w.SRC_LEN, threads=w.THREADS)
    t0 = time.perf_counter()
    run(srcs)  # warm-up (compiles Numba, makes seqjit's plans); sizes the rounds to keep a slow engine within BUDGET_S
    rounds = min(ROUNDS if batch == 1 else max(3, ROUNDS // 2), max(3, int(BUDGET_S / (time.perf_counter() - t0))))
    ids = benchmark.pedantic(run, args=(srcs,), rounds=rounds, iterations=1, warmup_rounds=0)
    assert [len(x) for x in ids] == [w.NEW_TOKENS] * batch, "every engine must generate exactly NEW_TOKENS tokens"
    benchmark.extra_info["ids"] = [[int(t) for t in x] for x in ids]


@pytest.mark.parametrize("batch", BATCHES, ids=lambda b: f"b{b}")
@pytest.mark.parametrize("engine", ["seqjit", "ctranslate2", "transformers"])
def test_marian(benchmark, engine, batch):
    run = _engine(("marian", engine), lambda: w.marian_engine(engine))
    _bench(benchmark, run, w.sources(batch), f"marian b{batch}", engine=engine, model="marian")


@pytest.mark.parametrize("batch", BATCHES, ids=lambda b: f"b{b}")
@pytest.mark.parametrize("kind", ["gru", "bahdanau"])
@pytest.mark.parametrize("engine", ["seqjit", "torch"])
def test_rnn(benchmark, engine, kind, batch):
    run = _engine((kind, engine), lambda: w.rnn_engine(engine, kind))
    srcs = w.sources(batch, vocab=w.RNN_VOCAB, eos=w.RNN_EOS)
    _bench(benchmark, run, srcs, f"{kind} b{batch}", engine=engine, model=kind)
