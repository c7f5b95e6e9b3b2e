"""Beam search against greedy decoding on the bundled G2P models, one word per call (issue 20: beam 4
at least half its own greedy throughput at batch 1), and at batch 64.

    python benchmarks/g2p/beam_vs_greedy.py [--threads 1] [--rounds 5]

Each model decodes the same 64 test-split words; the figure is the median over rounds of words/s.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import seqjit
from seqjit.g2p import BUNDLED, G2P
from seqjit.g2p.data import load_split


def words_per_second(g2p, words, beam: int, batch: int, rounds: int) -> float:
    chunks = [words[i:i + batch] for i in range(0, len(words), batch)]
    for chunk in chunks[:2]:
        g2p.predict(chunk, beam_size=beam)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for chunk in chunks:
            g2p.predict(chunk, beam_size=beam)
        times.append(time.perf_counter() - start)
    return len(words) / statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--beam", type=int, default=4)
    args = p.parse_args(argv)
    seqjit.set_num_threads(args.threads)
    words = [w for w, _ in load_split("test")][:64]
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if line.startswith("Model name")), "?")
    print(f"{cpu}, {args.threads} thread(s), median of {args.rounds} rounds over 64 test words\n")
    print(f"| model | batch | greedy words/s | beam {args.beam} words/s | beam / greedy |\n|---|---:|---:|---:|---:|")
    for name in BUNDLED:
        g2p = G2P(name)
        for batch in (1, 64):
            greedy = words_per_second(g2p, words, 1, batch, args.rounds)
            beam = words_per_second(g2p, words, args.beam, batch, args.rounds)
            print(f"| {name} | {batch} | {greedy:,.0f} | {beam:,.0f} | {beam / greedy:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
