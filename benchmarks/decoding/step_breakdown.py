"""Where one native decode step of Marian (opus-mt-en-de size) goes, instruction by instruction.

    python benchmarks/decoding/step_breakdown.py [--batch 16] [--beam 1] [--threads 1 2] [--step 10] [--reps 20]

The step program of a batch of ``batch * beam`` rows (the plan the native greedy and beam loops
run) is bound to a started decoder state at step ``step`` and run ``reps`` times: whole (``run``)
and timed per instruction (``run_timed``), at each thread count, at 2 threads both with the team of
two and alone (OpenMP for the products planned for the run's threads). Prints per-op-kind totals and
the linears by shape with their GFLOP/s, and the step's weight bytes and flops against a roofline
given by ``--peak`` GFLOP/s and ``--bandwidth`` GB/s (defaults: the 2-core figures measured by
benchmarks/gemm/decode_shapes.py on the Xeon of RESULTS.md). Also times the encoder (``model.start``)
and the argmax over the logits (the greedy loop's per-step work outside the program).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload as w  # noqa: E402


def _bind(model, batch: int, beam: int, step: int):
    """(native replay, feeds) of the decoder step for ``batch`` sources x ``beam`` rows at ``step``."""
    srcs = np.repeat(np.array(w.sources(batch)), beam, axis=0)
    state = model.start(srcs, max_length=w.NEW_TOKENS + 1)
    state.step = step
    prev = np.full(srcs.shape[0], model.decoder_start_id, np.int64)
    feeds = model.step_feeds(state, prev)
    native = model.step_plan(state, "decoder_step", feeds).native_replay(feeds)
    if native is None:
        raise SystemExit("the step plan did not lower to the native replay")
    native.bind(feeds)
    return native, srcs


def _linear_shape(native, name: str):
    """(M, K, N) of linear node ``name``."""
    node = next(n for n in native.low.plan.nodes if n.name == name)
    x, y = native.low.arrays[node.inputs[0]], native.low.arrays[node.outputs[0]]
    return (int(np.prod(x.shape[:-1])), int(x.shape[-1]), int(y.shape[-1]))


def _measure(native, nthreads: int, team: int, reps: int) -> tuple:
    """(median ms of a whole run, {instruction: median seconds}) in the given team mode."""
    prog = native.program
    for _ in range(3):
        prog.run(nthreads, team)
    whole = []
    for _ in range(reps):
        t0 = time.perf_counter()
        prog.run(nthreads, team)
        whole.append(time.perf_counter() - t0)
    per = [prog.run_timed(nthreads, team) for _ in range(reps)]
    med = [statistics.median(col) for col in zip(*per)]
    return 1e3 * statistics.median(whole), med


def report(native, label: str, whole_ms: float, times, peak: float, bw: float) -> None:
    by_kind: dict = defaultdict(float)
    linears: dict = defaultdict(lambda: [0, 0.0])
    for (name, op, kind), t in zip(native.low.labels, times):
        by_kind[op] += t
        if op == "linear":
            linears[_linear_shape(native, name)][0] += 1
            linears[_linear_shape(native, name)][1] += t
    total = sum(times)
    print(f"\n## {label}: whole run {whole_ms:.2f} ms, sum of timed instructions {1e3 * total:.2f} ms")
    print(f"{'op':<16}{'ms':>9}{'%':>7}")
    for op, t in sorted(by_kind.items(), key=lambda r: -r[1]):
        print(f"{op:<16}{1e3 * t:9.3f}{100 * t / total:7.1f}")
    print(f"\n{'M x K x N':<18}{'count':>6}{'ms':>9}{'GFLOP/s':>9}{'bound':>8}{'of bound':>9}")
    for (m, k, n), (c, t) in sorted(linears.items(), key=lambda r: -r[1][1]):
        flop, byts = 2.0 * m * k * n * c, 4.0 * k * n * c
        bound = min(peak, bw * flop / byts)
        g = flop / t / 1e9
        print(f"{f'{m}x{k}x{n}':<18}{c:6d}{1e3 * t:9.3f}{g:9.1f}{bound:8.1f}{100 * g / bound:8.0f}%")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--step", type=int, default=10)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--peak", type=float, default=427.0, help="GFLOP/s of the roofline (2 cores)")
    p.add_argument("--bandwidth", type=float, default=23.3, help="GB/s of the roofline (2 cores)")
    args = p.parse_args(argv)
    import seqjit

    model = seqjit.convert.from_hf(w.prepare_marian() / "hf")
    print(f"load {os.getloadavg()[0]:.2f}; CPU {w.cpu_name()}; batch {args.batch} x beam {args.beam}, step {args.step}")
    for nt in args.threads:
        seqjit.set_num_threads(nt)
        native, srcs = _bind(model, args.batch, args.beam, args.step)
        for team in ((0,) if nt < 2 else (1, 0)):
            whole, times = _measure(native, nt, team, args.reps)
            one = nt == 1  # one core's roof: the bench's 240 / 427 GFLOP/s and 15.5 / 23.3 GB/s
            report(native, f"{nt} thread(s){', team of two' if team else ''}", whole, times,
                   args.peak * (240 / 427 if one else 1), args.bandwidth * (15.5 / 23.3 if one else 1))
        enc = []
        for _ in range(5):
            t0 = time.perf_counter()
            model.start(srcs, max_length=w.NEW_TOKENS + 1)
            enc.append(time.perf_counter() - t0)
        rows = np.random.default_rng(0).standard_normal((srcs.shape[0], 58101), dtype=np.float32)
        t0 = time.perf_counter()
        for _ in range(20):
            rows.argmax(axis=1)
        print(f"\nencoder (model.start, {nt} thread(s)): {1e3 * statistics.median(enc):.2f} ms per call; "
              f"NumPy argmax of the logits: {1e3 * (time.perf_counter() - t0) / 20:.3f} ms per step")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
