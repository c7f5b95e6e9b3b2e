"""Many callers on one model (issue 11): tokens/s of batch-1 greedy requests on the tiny Transformer
(small_workload.py) from 1 and 2 Python threads sharing one loaded model, 1 intra-op thread each.

    python benchmarks/decoding/parallel_callers.py [--seconds 5] [--model tiny|gru]

Prints tokens/s for each caller count (median of --repeats runs) and the 2-caller / 1-caller ratio.
The native decode releases the GIL, so two callers can use two cores. Also: one caller at 2 intra-op
threads (its products split over the team of two, kernels/_runtime/native_team.h), and two callers
at 2 threads each (one of them holds the team; the other's run makes it step back).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import small_workload as w  # noqa: E402


def throughput(run, sources, callers: int, seconds: float, tokens_each: int) -> float:
    done = [0] * callers
    stop = time.perf_counter() + seconds

    def work(k):
        i = k
        while time.perf_counter() < stop:
            run([sources[i % len(sources)]])
            done[k] += 1
            i += callers

    threads = [threading.Thread(target=work, args=(k,)) for k in range(callers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) * tokens_each / (time.perf_counter() - t0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", choices=("tiny", "gru"), default="tiny")
    args = p.parse_args(argv)
    if args.model == "tiny":
        run, sources, tokens = w.tiny_engine("seqjit", 1), w.tiny_sources(64), w.TINY_NEW
    else:
        run, sources, tokens = w.gru_engine("seqjit", 1), w.words(64), w.GRU_NEW
    run(sources[:2])
    rates = {}
    for callers in (1, 2):
        rates[callers] = statistics.median(throughput(run, sources, callers, args.seconds, tokens)
                                           for _ in range(args.repeats))
        print(f"{callers} caller(s): {rates[callers]:,.0f} tok/s", flush=True)
    print(f"2 callers / 1 caller: {rates[2] / rates[1]:.2f}x")
    import seqjit

    seqjit.set_num_threads(2)
    for callers in (1, 2):
        rate = statistics.median(throughput(run, sources, callers, args.seconds, tokens) for _ in range(args.repeats))
        print(f"{callers} caller(s) at 2 intra-op threads: {rate:,.0f} tok/s", flush=True)


if __name__ == "__main__":
    main()
