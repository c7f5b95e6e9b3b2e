"""The bf16-arithmetic linear_half kernel (AVX512-BF16 vdpbf16ps, kernels/linear_half/native_bf16dot.h)
against the float32 products: one native linear_half / linear node at M x K x N (default the
encoder's batch-16 shape, 320 x 512 x 2048), GFLOP/s, median of several runs, one thread.

    taskset -c 1 python3 benchmarks/half/bf16_gemm.py [--shape M K N] [--repeat 15]

Peers, same process: ``linear`` (float32 weights, the packed float32 kernel), ``linear_half``
bfloat16 weights with float32 products, and with bf16 products (plus the portable path of the
bf16 products, for reference)."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import seqjit
from seqjit import kernels
from seqjit.graph import Executor, GraphBuilder, _native_vm


def executor(op, w, **attrs):
    g = GraphBuilder("one")
    g.output(g.op(op, g.input("x", dtype="float"), g.constant("w", w), **attrs), name="y")
    return Executor(g.build(), passes=(), replay="native")


def timed(executors, x, repeat):
    """The median time of each executor's run, rounds alternating between them."""
    feeds = {"x": x}
    for ex in executors:
        ex.run(feeds)
    times = [[] for _ in executors]
    for _ in range(repeat):
        for ex, ts in zip(executors, times):
            t = time.perf_counter()
            ex.run(feeds)
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs=3, default=(320, 512, 2048), metavar=("M", "K", "N"))
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    seqjit.set_num_threads(1)
    m, k, n = args.shape
    rng = np.random.default_rng(0)
    wf = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    wb = kernels.get("narrow_half", "reference")(wf, "bfloat16")
    x = rng.standard_normal((m, k)).astype(np.float32)
    flop = 2.0 * m * k * n
    rows = [("float32 weights, float32 products", executor("linear", wf)),
            ("bfloat16 weights, float32 products", executor("linear_half", wb, fmt="bfloat16")),
            ("bfloat16 weights, bf16 products", executor("linear_half", wb, fmt="bfloat16", arith="bfloat16"))]
    print(f"M={m} K={k} N={n}, 1 thread, median of {args.repeat}; bf16 products run {_native_vm.bf16_isa()}")
    times = timed([ex for _, ex in rows], x, args.repeat)
    base = times[0]
    for (name, _), t in zip(rows, times):
        print(f"  {name:40s} {t * 1e3:8.3f} ms {flop / t / 1e9:8.1f} GFLOP/s  {base / t:5.2f}x")
    _native_vm.bf16_native(False)
    (t,) = timed([rows[-1][1]], x, max(3, args.repeat // 3))
    print(f"  {'  (portable path: ' + _native_vm.bf16_isa() + ')':40s} {t * 1e3:8.3f} ms {flop / t / 1e9:8.1f} GFLOP/s  "
          f"{base / t:5.2f}x")
    _native_vm.bf16_native(True)


if __name__ == "__main__":
    main()
