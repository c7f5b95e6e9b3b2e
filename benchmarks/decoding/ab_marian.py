"""Marian greedy or beam search, seqjit against ONNX Runtime (or any engines quick_marian.py runs), alternating
processes: each round runs every engine once at each thread count in its own process
(quick_marian.py), so all see the same moments of a shared host; the table gives, per engine and
batch, the median over rounds of each process's median tok/s at the better thread count, and the
ratio of the first engine to the others. One command for the issue-26 check (greedy batch 16
>= 1.2x ONNX Runtime), quicker than run.py's full peers table:

    python benchmarks/decoding/ab_marian.py [--engines seqjit,onnxruntime] [--threads 1 2] [--rounds 3] [--beam 4]

``--beam 4`` gives the beam-4 cases (batch 16: 64 rows a step, the issue-26 check beam 4 >= 1.2x ONNX
Runtime).

ONNX Runtime needs the optimum export made once (run.py or peers.py with --ort-python /
SEQJIT_ORT_EXPORT_PYTHON; export_onnx.py).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from workload import cpu_name  # noqa: E402  (this folder is on sys.path when run as a script)

HERE = Path(__file__).resolve().parent


def one(engine: str, threads: int, beam: int = 1) -> dict:
    env = dict(os.environ, SEQJIT_BENCH_THREADS=str(threads))
    out = subprocess.run([sys.executable, str(HERE / "quick_marian.py"), engine, str(beam)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--engines", default="seqjit,onnxruntime")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--beam", type=int, default=1, help="beam width (1: greedy)")
    args = p.parse_args(argv)
    engines = args.engines.split(",")
    runs: dict = {}  # (engine, threads, batch) -> [median tok/s of each round]
    loads = []
    for _ in range(args.rounds):
        for engine in engines:
            for t in args.threads:
                r = one(engine, t, args.beam)
                loads.append(r["load"])
                for b in (1, 16):
                    runs.setdefault((engine, t, b), []).append(r[f"b{b}"]["median_tok_s"])
    mode = "greedy" if args.beam == 1 else f"beam {args.beam}"
    print(f"CPU: {cpu_name()}; load average (1 min) {min(loads):.1f}-{max(loads):.1f}; {args.rounds} rounds; {mode}")
    head = "| batch | " + " | ".join(engines) + " | " + " | ".join(f"{engines[0]} / {e}" for e in engines[1:]) + " |"
    print(head)
    print("|" + "---:|" * (1 + 2 * len(engines) - 1))
    for b in (1, 16):
        best = {}
        for e in engines:
            t = max(args.threads, key=lambda t: statistics.median(runs[(e, t, b)]))
            best[e] = (statistics.median(runs[(e, t, b)]), t)
        cells = [f"{best[e][0]:.1f} (t={best[e][1]})" for e in engines]
        ratios = [f"{best[engines[0]][0] / best[e][0]:.2f}x" for e in engines[1:]]
        print(f"| {b} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
