"""Speed of the bundled G2P RNN models (``gru``, ``attention``) int8 against float32: greedy words/s
one word per call and in batches of 64 (what ``seqjit bench g2p`` measures, without PyTorch),
``--threads`` threads, the two variants alternated round by round in one process so that machine
load hits both alike; the median of the rounds.

    python benchmarks/int8/g2p_rnn_speed.py --threads 1 --rounds 7

int8 here: every linear and the GRU matrices (``weight_ih``/``weight_hh``) int8 with per-row scales
(``seqjit.quantize``); float32: the shipped weights. Both run the native replay.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> int:
    import seqjit
    from seqjit.g2p import G2P
    from seqjit.g2p.data import load_split

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--words", type=int, default=256, help="words per batch-64 pass")
    p.add_argument("--single", type=int, default=64, help="words per one-word-per-call pass")
    p.add_argument("--models", nargs="+", default=["gru", "attention"])
    args = p.parse_args(argv)
    seqjit.set_num_threads(args.threads)
    words = [w for w, _ in load_split("test")[:args.words]]
    print(f"threads {args.threads}, rounds {args.rounds}, median words/s")
    print("| model | batch | float32 | int8 | int8 / float32 |")
    print("|---|---:|---:|---:|---:|")
    for name in args.models:
        variants = {"float32": G2P(name)}
        variants["int8"] = G2P(name)
        variants["int8"].model = seqjit.quantize(variants["int8"].model, "int8")
        for size, pool in ((1, words[:args.single]), (64, words)):
            times = {k: [] for k in variants}
            for g2p in variants.values():  # warm-up: plans, lowering
                g2p.predict(pool[:size])
            for _ in range(args.rounds):
                for key, g2p in variants.items():
                    t = time.perf_counter()
                    for i in range(0, len(pool), size):
                        g2p.predict(pool[i:i + size])
                    times[key].append(time.perf_counter() - t)
            rate = {k: len(pool) / float(np.median(v)) for k, v in times.items()}
            print(f"| {name} | {size} | {rate['float32']:.0f} | {rate['int8']:.0f} | "
                  f"{rate['int8'] / rate['float32']:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
