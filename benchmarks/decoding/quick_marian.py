"""Marian greedy tok/s for one engine in this process, batches 1 and 16 (12 and 6 timed rounds after
one warm-up call), as one JSON line: a quick same-host A/B of two builds, run alternately in their
own processes (the full report is run.py's).

    SEQJIT_BENCH_THREADS=1 python benchmarks/decoding/quick_marian.py seqjit|ctranslate2 [beam]

``beam`` (default 1): the beam width (beam 4 at batch 16 is the issue-26 case of 64 rows a step).
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload as w  # noqa: E402


def main(engine: str, beam: int = 1) -> None:
    w.set_threads()
    run = w.marian_engine(engine)
    out = {"engine": engine, "threads": w.THREADS, "beam": beam}
    for batch, rounds in ((1, 12), (16, 6)):
        srcs = w.sources(batch)
        run(srcs, beam)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            run(srcs, beam)
            times.append(time.perf_counter() - t0)
        times.sort()
        out[f"b{batch}"] = {"median_tok_s": batch * w.NEW_TOKENS / times[len(times) // 2],
                            "best_tok_s": batch * w.NEW_TOKENS / times[0]}
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
