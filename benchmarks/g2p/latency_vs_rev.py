"""Batch-1 latency of the bundled G2P models against the same models at another git revision (issue 24:
a retrained model stays within 2x of the one it replaces), in one process, rounds interleaved.

    python benchmarks/g2p/latency_vs_rev.py --rev main [--model attention] [--threads 1] [--rounds 7]

The models of ``--rev`` are read with ``git show`` into a temporary directory. One word per call, greedy,
the same 64 test-split words; each round times every model once (so a load change hits them alike), and
the figure is the median over rounds. Also the bundled model after ``seqjit.quantize(model, "int8")``.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import seqjit
from seqjit.g2p import BUNDLED, G2P
from seqjit.g2p.data import load_split
from seqjit.g2p.predictor import model_dir

ROOT = Path(__file__).resolve().parents[2]
FILES = ("config.json", "g2p.json", "model.safetensors")


def models_at(rev: str, name: str, into: Path) -> Path:
    """Write bundled model ``name`` as it was at git revision ``rev`` into ``into/name``."""
    directory = into / name
    directory.mkdir(parents=True)
    relative = model_dir(name).resolve().relative_to(ROOT)
    for file in FILES:
        blob = subprocess.run(["git", "show", f"{rev}:{relative.as_posix()}/{file}"], cwd=ROOT, capture_output=True)
        if blob.returncode:
            raise SystemExit(f"--rev {rev}: no {relative}/{file} there ({blob.stderr.decode().strip()})")
        (directory / file).write_bytes(blob.stdout)
    return directory


def seconds_per_word(g2p, words) -> float:
    start = time.perf_counter()
    for word in words:
        g2p.predict([word])
    return (time.perf_counter() - start) / len(words)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rev", default="main", help="git revision whose bundled models are the baseline")
    p.add_argument("--model", action="append", choices=BUNDLED, help="default: all three")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    seqjit.set_num_threads(args.threads)
    words = [w for w, _ in load_split("test")][:64]
    print(f"batch 1 (one word per call), greedy, {args.threads} thread(s), median of {args.rounds} interleaved "
          f"rounds over 64 test words; baseline: the models at {args.rev}\n")
    print("| model | baseline us/word | now us/word | now / baseline | now int8 us/word | int8 / baseline |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.model or BUNDLED:
            base, now, int8 = G2P(str(models_at(args.rev, name, Path(tmp)))), G2P(name), G2P(name)
            int8.model = seqjit.quantize(int8.model, "int8")
            engines = (base, now, int8)
            for g2p in engines:  # warm-up
                seconds_per_word(g2p, words[:8])
            times = [[], [], []]
            for _ in range(args.rounds):
                for t, g2p in zip(times, engines):
                    t.append(seconds_per_word(g2p, words))
            b, n, q = (1e6 * statistics.median(t) for t in times)
            print(f"| {name} | {b:.0f} | {n:.0f} | {n / b:.2f}x | {q:.0f} | {q / b:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
