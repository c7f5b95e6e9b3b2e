"""pytest-benchmark of the small-model decodes (see small_workload.py), one engine and thread
count per process: ``SEQJIT_SMALL=<model>:<engine>:<threads>[:<mode>]`` (mode:
greedy, beam4 or topk10, the tiny model only). Without it, seqjit at 1 thread on both models, greedy.

    SEQJIT_SMALL=tiny:ctranslate2:1 python -m pytest benchmarks/decoding/test_bench_small.py --benchmark-enable
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import small_workload as w  # noqa: E402

SPEC = os.environ.get("SEQJIT_SMALL")
CASES = [tuple((SPEC + ":greedy").split(":")[:4])] if SPEC else [("tiny", "seqjit", "1", "greedy"),
                                                                  ("gru", "seqjit", "1", "greedy")]
BATCHES = {"tiny": (1, 64), "gru": (1, 256)}
PARAMS = [(m, e, int(t), b, mode) for m, e, t, mode in CASES for b in BATCHES[m]]


@pytest.mark.parametrize("model,engine,threads,batch,mode", PARAMS,
                         ids=[f"{m}-{e}-t{t}-b{b}-{mode}" for m, e, t, b, mode in PARAMS])
def test_small_decode(benchmark, model, engine, threads, batch, mode):
    run = w.tiny_engine(engine, threads, mode) if model == "tiny" else w.gru_engine(engine, threads)
    if model == "tiny":
        sources, tokens = w.tiny_sources(batch), w.TINY_NEW
    else:
        # one word at a time: a call per word over 64 words; batched: one call of `batch` words
        sources, tokens = w.words(64 if batch == 1 else batch), w.GRU_NEW
    call = (lambda: [run([s]) for s in sources]) if (batch == 1 and model == "gru") else (lambda: run(sources))
    out = call()
    ids = [r for chunk in out for r in chunk] if (batch == 1 and model == "gru") else out
    assert len(ids) == len(sources) and all(len(r) == tokens for r in ids)
    benchmark.extra_info.update(model=model, engine=engine, threads=threads, batch=batch, mode=mode, items=len(sources),
                                tokens=len(sources) * tokens)
    benchmark.pedantic(call, rounds=int(os.environ.get("SEQJIT_BENCH_ROUNDS", "30")), warmup_rounds=2)
