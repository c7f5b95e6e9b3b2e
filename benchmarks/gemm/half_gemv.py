"""16-bit weights against float32 in the native replay: linear_half (fp16 and bf16 bits, widened in the
kernel) against the float32 linear at Marian's decode shapes, weights streamed from memory.

Each product runs as a one-op native program (the VM's own code path, as decode_shapes.py). Every
engine cycles through a ring of weight copies larger than the last-level cache (``--ring-mb``, at
least twice the LLC and 64 MB), one copy per call, so each call reads its weight from DRAM as a
decode step of a model larger than the cache does. Rounds alternate the engines (float32, fp16, bf16,
then again), ``--rounds`` of them, each round the mean of one or more passes over the ring; the
report gives the median over rounds of the call time, the weight bytes per second (N x K x 2 or 4
bytes per call) and the speed-up over float32 (a ratio of medians). The float32 linear is the
native one as a model runs it (at 16 rows it takes the packed copy kernel_choice picks).

    PYTHONPATH=src python benchmarks/gemm/half_gemv.py [--rows 1 16] [--threads 1] [--rounds 5] \
        [--shapes 512x512 2048x512 512x2048 58101x512] [--json out.json]

Shapes are N x K (output features x input features, PyTorch's weight shape).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[2]))  # last: the checkout's kernels/ shadows no installed `kernels`
from benchmarks.harness.floor import llc_bytes as _llc_bytes  # noqa: E402

MARIAN = ["512x512", "2048x512", "512x2048", "58101x512"]
ENGINES = ("float32", "float16", "bfloat16")


def program(x, w, fmt):
    """A bound one-op native program of ``x @ widen(w).T`` (fmt None: the float32 linear)."""
    from seqjit.graph import Executor, GraphBuilder

    g = GraphBuilder("one")
    attrs = {} if fmt is None else {"fmt": fmt}
    g.output(g.op("linear" if fmt is None else "linear_half", g.input("x", dtype="float"), g.constant("w", w),
                  **attrs), name="y")
    ex = Executor(g.build(), passes=(), replay="native")
    out = ex.run({"x": x})["y"]
    native = ex.plan_for({"x": x}).native
    assert native is not None and all(kind == "native" for _, _, kind in native.low.labels)
    native.bind({"x": x})
    return native.program, out, ex


def ring(n, k, engine, ring_bytes, rng):
    """Weight copies (distinct arrays) filling ``ring_bytes``."""
    from seqjit import kernels

    item = 4 if engine == "float32" else 2
    copies = max(2, -(-ring_bytes // (item * n * k)))
    base = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    if engine == "float32":
        return [base.copy() for _ in range(copies)]
    bits = kernels.get("narrow_half", "reference")(base, engine)
    return [bits.copy() for _ in range(copies)]


def measure(cells, rounds, ring_bytes, min_seconds):
    import seqjit

    rng = np.random.default_rng(0)
    results = []
    for n, k, m, threads in cells:
        x = rng.standard_normal((m, k)).astype(np.float32)
        progs = {}
        for engine in ENGINES:
            ws = ring(n, k, engine, ring_bytes, rng)
            progs[engine] = [program(x, w, None if engine == "float32" else engine) for w in ws]
        seqjit.set_num_threads(threads)
        ref = progs["float32"][0][1]
        errs = {e: float(np.abs(progs[e][0][1] - ref).max() / max(1.0, np.abs(ref).max())) for e in ENGINES}
        for engine in ENGINES:  # warm-up: every page touched, the team's choice settled
            for p, _, _ in progs[engine]:
                for _ in range(2):
                    p.run(threads)
        times = {e: [] for e in ENGINES}
        for _ in range(rounds):
            for engine in ENGINES:
                ps = progs[engine]
                calls, t0 = 0, time.perf_counter()
                while True:
                    for p, _, _ in ps:
                        p.run(threads)
                    calls += len(ps)
                    if time.perf_counter() - t0 >= min_seconds:
                        break
                times[engine].append((time.perf_counter() - t0) / calls)
        med = {e: statistics.median(times[e]) for e in ENGINES}
        row = {"N": n, "K": k, "M": m, "threads": threads, "ring_mb": ring_bytes >> 20}
        for e in ENGINES:
            item = 4 if e == "float32" else 2
            row[e] = {"us": med[e] * 1e6, "weight_gbps": n * k * item / med[e] / 1e9,
                      "speedup": med["float32"] / med[e], "rel_err_vs_f32": errs[e],
                      "rounds_us": [t * 1e6 for t in times[e]]}
        results.append(row)
        print(f"{m:3} rows {threads} thr {n:6}x{k:<5}| " + " | ".join(
            f"{e:8} {row[e]['us']:9.1f} us {row[e]['weight_gbps']:5.1f} GB/s x{row[e]['speedup']:.2f}" for e in ENGINES),
            flush=True)
        del progs
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--shapes", nargs="+", default=MARIAN, help="N x K")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ring-mb", type=int, default=0, help="bytes of weight copies per engine (0: max(64 MB, 2 x LLC))")
    ap.add_argument("--min-seconds", type=float, default=0.1, help="seconds of one engine's round at least")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    ring_bytes = (args.ring_mb << 20) or max(64 << 20, 2 * _llc_bytes())
    cells = [(int(s.split("x")[0]), int(s.split("x")[1]), m, t) for s in args.shapes for m in args.rows for t in args.threads]
    from seqjit.graph import _native_vm

    print(f"variant {_native_vm.half_isa()}, LLC {_llc_bytes() >> 20} MB, ring {ring_bytes >> 20} MB per engine", flush=True)
    results = measure(cells, args.rounds, ring_bytes, args.min_seconds)
    if args.json:
        Path(args.json).write_text(json.dumps({"variant": _native_vm.half_isa(), "cells": results}, indent=1))


if __name__ == "__main__":
    main()
