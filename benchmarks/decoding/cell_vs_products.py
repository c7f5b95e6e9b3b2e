"""Issue 11, "kernels at decode shapes": a recurrent cell step against its two matrix products.

    python benchmarks/decoding/cell_vs_products.py [--threads 1] [--out benchmarks/results/cell_vs_products.md]

For B = 1..64 and H = I = 128..512, the native replay of one ``gru_cell`` (``lstm_cell``) node against
the native replay of its two products alone, ``linear(x, W_ih)`` + ``linear(h, W_hh)`` with the
biases (the same kernels the cell calls, in one program). Medians of many runs of the compiled
program (no Python in between); the target is a cell at most 1.2x its products. Both graphs are run
back to back in one process on one thread, so they see the same cache state (weights warm in
cache where they fit: 3-4 x H x (I + H) floats).
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import seqjit
from seqjit.graph import Executor, GraphBuilder

ROOT = Path(__file__).resolve().parents[2]


def _program(build, feeds):
    g = GraphBuilder("one")
    build(g)
    ex = Executor(g.build(), passes=(), replay="native")
    ex.run(feeds)
    plan = ex.plan_for(feeds)
    if not plan.native or any(kind != "native" for _, _, kind in plan.native.low.labels):
        raise RuntimeError("the graph did not lower to native instructions only")
    plan.native.bind(feeds)
    return ex, plan.native.program  # the executor keeps the plan (and its buffers) alive


def _median_us(program, threads: int, budget: float = 0.15) -> float:
    for _ in range(20):
        program.run(threads)
    times = []
    end = time.perf_counter() + budget
    while time.perf_counter() < end or len(times) < 50:
        t = time.perf_counter()
        program.run(threads)
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e6


def measure(kind: str, b: int, h: int, threads: int) -> tuple[float, float]:
    g = 3 if kind == "gru" else 4
    rng = np.random.default_rng(0)
    f = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)  # noqa: E731
    x, hid, c = f(b, h), f(b, h), f(b, h)
    w = (f(g * h, h), f(g * h, h), f(g * h), f(g * h))
    feeds = {"x": x, "h": hid} if kind == "gru" else {"x": x, "h": hid, "c": c}

    def cell(gb):
        ws = [gb.constant(f"w{j}", a) for j, a in enumerate(w)]
        ins = [gb.input(n, dtype="float") for n in feeds]
        outs = gb.op(f"{kind}_cell", *ins, *ws, outputs=1 if kind == "gru" else 2)
        for j, o in enumerate(outs if isinstance(outs, (list, tuple)) else [outs]):
            gb.output(o, name=f"y{j}")

    def products(gb):
        xi, hi = gb.input("x", dtype="float"), gb.input("h", dtype="float")
        if kind == "lstm":
            gb.input("c", dtype="float")
        wih, whh, bih, bhh = (gb.constant(f"w{j}", a) for j, a in enumerate(w))
        gb.output(gb.op("linear", xi, wih, bih, weight_layout="out_in"), name="gi")
        gb.output(gb.op("linear", hi, whh, bhh, weight_layout="out_in"), name="gh")

    keep = [_program(cell, feeds), _program(products, feeds)]
    return _median_us(keep[0][1], threads), _median_us(keep[1][1], threads)


def _cpu_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    return next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("model name")), platform.machine())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/cell_vs_products.md"))
    args = p.parse_args()
    seqjit.set_num_threads(args.threads)
    rows = []
    for kind in ("gru", "lstm"):
        for h in (128, 256, 512):
            for b in (1, 4, 16, 64):
                cell_us, prod_us = measure(kind, b, h, args.threads)
                rows.append(f"| {kind}_cell | {b} | {h} | {cell_us:.2f} | {prod_us:.2f} | {cell_us / prod_us:.2f}x |")
                print(rows[-1], flush=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"# A recurrent cell step against its two matrix products (issue 11)\n\n"
            f"`python benchmarks/decoding/cell_vs_products.py --threads {args.threads}`, {stamp}, "
            f"{_cpu_name()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}. "
            "Medians of the native programs (us); I = H; target: cell / products <= 1.2x.\n\n"
            "| cell | B | H | cell (us) | linear(x, W_ih) + linear(h, W_hh) (us) | cell / products |\n"
            "|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n")
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
