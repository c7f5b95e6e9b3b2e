"""GFLOP/s of the native replay's linear against NumPy/BLAS sgemm and ONNX Runtime's MatMul at Marian's
decode shapes, beside this host's roofline (FMA peak and read bandwidth from roofline_probe.c).

Each product runs as a one-op native program (the VM's own code path: the kernel, the team of two
at 2 threads), as ``np.matmul(x, W.T)`` with BLAS held to the same thread count, and as a one-node
ONNX MatMul in an onnxruntime session with as many intra-op threads (ort_matmul.py; left out
without onnx and onnxruntime), each engine in its own process (the spinning thread pools of BLAS and
ONNX Runtime took the second core from the native team's worker when they shared one), engines
alternating over three rounds, best of ``--reps`` calls (spanning MIN_WINDOW) per round. "hot": one
weight, reused (it stays in L2/L3); "stream": enough copies of the weight (STREAM_BYTES,
``--stream-mb``), used in turn, that each call reads it from L3 or memory, as a decode step reads
its weights. The bound is min(peak, bandwidth x flop per byte of weight, x and y) for "stream", the
peak for "hot"; the probe runs before and after the products (its best is kept, so a
busy moment lowers the roof less).

    python benchmarks/gemm/decode_shapes.py [--threads 1 2] [--rows 1 4 16 64 256] \
        [--json benchmarks/results/gemm_decode_shapes.json] [--png benchmarks/results/roofline.png]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ort_matmul  # noqa: E402
from roofline_plot import intensity, plot  # noqa: E402

sys.path.append(str(HERE.parents[1]))  # last: the checkout's kernels/ shadows no installed `kernels`
from benchmarks.harness.floor import llc_bytes as _last_level_cache_bytes, roofline  # noqa: E402
#: (K, N) of opus-mt-en-de's decode step: attention projections, FFN in/out, the output projection
MARIAN = [(512, 512), (512, 2048), (2048, 512), (512, 58101)]

#: bytes of weight copies a "stream" cell cycles through: 256 MB, or with ``--stream-mb llc`` twice
#: the last-level cache (the Xeon of RESULTS.md reports 480 MB of L3; a run at 960 MB took 14 minutes
#: for the 16 acceptance cells, against 4.5, and gave the same percentages within 5 points)
STREAM_BYTES = int(os.environ.get("SEQJIT_BENCH_STREAM_BYTES", 256 << 20))


def native_program(x, w):
    """A one-op native program computing x @ w.T into its output; returns (run, output)."""
    from seqjit.graph import Executor, GraphBuilder

    g = GraphBuilder("linear")
    g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", w)), name="y")
    ex = Executor(g.build(), passes=(), replay="native")
    out = ex.run({"x": x})["y"]
    native = ex.plan_for({"x": x}).native
    native.bind({"x": x})
    return native.program, out, ex


#: seconds a cell's calls span at least: three times the native team's back-off (native_team.h: 50 ms
#: without the team after its worker was preempted twice), so that a hiccup of the host just before
#: a cell does not leave all of its 20 sub-millisecond calls alone (as a 2-thread cell ran at 1
#: thread's speed in two runs of three)
MIN_WINDOW = 0.15


def best(fn, reps: int, budget: float = 0.4) -> float:
    """The fastest of at least ``reps`` calls spanning at least MIN_WINDOW seconds (fewer calls, at
    least 3, once ``budget`` seconds are spent)."""
    fn()
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if (len(times) >= reps and t1 - start >= MIN_WINDOW) or (t1 - start > budget and len(times) >= 3):
            return min(times)


ENGINES = ("native", "blas", "ort")


def measure_one(engine, m, k, n, threads, reps, mode):
    """Best seconds of one engine's call (and the native product's relative error, else 0), in this
    process, which runs no other engine: the thread pools of BLAS and ONNX Runtime spin after their
    calls and took the second core from the native team's worker when they shared a process."""
    from threadpoolctl import threadpool_limits

    import seqjit

    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k), dtype=np.float32)
    copies = 1 if mode == "hot" else max(1, -(-STREAM_BYTES // (4 * k * n)))
    ws = [rng.standard_normal((n, k), dtype=np.float32) * 0.05 for _ in range(copies)]
    turn = {"i": 0}
    err = 0.0
    if engine == "native":
        progs = [native_program(x, w) for w in ws]
        ref = x @ ws[0].T
        err = float(np.abs(progs[0][1] - ref).max() / max(1.0, np.abs(ref).max()))
        seqjit.set_num_threads(threads)
        for p, _, _ in progs:  # a program's first runs at 2 threads try alone, then the team; then it keeps the faster
            for _ in range(4):
                p.run(threads)

        def call():
            progs[turn["i"] % copies][0].run(threads)
            turn["i"] += 1
    elif engine == "blas":
        def call():
            np.matmul(x, ws[turn["i"] % copies].T)
            turn["i"] += 1
    else:
        if not ort_matmul.available():
            return None, 0.0
        orts = [ort_matmul.matmul_call(w, x, threads)[0] for w in ws]

        def call():
            orts[turn["i"] % copies]()
            turn["i"] += 1
    with threadpool_limits(threads):
        return best(call, reps), err


def _child(engine: str, cells, reps: int) -> None:
    """``--child``: one engine over the cells (mode, threads, M, K, N), a JSON line each."""
    for mode, threads, m, k, n in cells:
        t, err = measure_one(engine, m, k, n, threads, reps, mode)
        print(json.dumps({"cell": [mode, threads, m, k, n], "t": t, "err": err}), flush=True)


def measure_all(cells, reps: int, rounds: int = 3) -> list:
    """Every engine over the cells, each engine in its own process, engines alternating over
    ``rounds`` (so all see the same moments of a shared host); per cell and engine the best time."""
    spec = json.dumps(cells)
    times: dict = {}
    errs: dict = {}
    for _ in range(rounds):
        for engine in ENGINES:
            out = subprocess.run([sys.executable, __file__, "--child", engine, spec, str(reps)], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                r = json.loads(line)
                key = (tuple(r["cell"]), engine)
                if r["t"] is not None:
                    times[key] = min(times.get(key, float("inf")), r["t"])
                errs[tuple(r["cell"])] = max(errs.get(tuple(r["cell"]), 0.0), r["err"])
    rows = []
    for cell in map(tuple, cells):
        mode, threads, m, k, n = cell
        flop = 2.0 * m * k * n
        t_nat, t_blas, t_ort = (times.get((cell, e)) for e in ENGINES)
        rows.append({"M": m, "K": k, "N": n, "threads": threads, "mode": mode, "native_gflops": flop / t_nat / 1e9,
                     "blas_gflops": flop / t_blas / 1e9, "ort_gflops": flop / t_ort / 1e9 if t_ort else None,
                     "native_us": t_nat * 1e6, "blas_us": t_blas * 1e6, "ort_us": t_ort * 1e6 if t_ort else None,
                     "rel_err": errs.get(cell, 0.0)})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    ap.add_argument("--modes", nargs="+", default=["stream", "hot"])
    ap.add_argument("--shapes", default=None, help="K,N pairs as 512x512,512x58101 (default: Marian's)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None, help="the roofline picture (roofline_plot.py) of the stream rows")
    ap.add_argument("--reprobe", default=None, metavar="JSON",
                    help="no products: probe the roof again, keep the best with that file's, rewrite it (and --png)")
    ap.add_argument("--stream-mb", default="256",
                    help="MB of weight copies a stream cell cycles through, or 'llc': twice the last-level cache")
    ap.add_argument("--child", nargs=3, metavar=("ENGINE", "CELLS", "REPS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child[0], json.loads(args.child[1]), int(args.child[2]))
    if args.reprobe:
        data = json.loads(Path(args.reprobe).read_text())
        return _report(data["rows"], data["roofline"], args.reprobe, args.png)
    mb = args.stream_mb
    stream = 2 * _last_level_cache_bytes() if mb == "llc" else int(float(mb) * (1 << 20))
    os.environ["SEQJIT_BENCH_STREAM_BYTES"] = str(max(stream, 1 << 20))  # read by the children
    shapes = MARIAN if not args.shapes else [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
    cells = [[mode, threads, m, k, n] for mode in args.modes for threads in args.threads for k, n in shapes
             for m in args.rows if not (mode == "hot" and n > 4096)]  # 119 MB: never hot
    roof = roofline()
    print(f"# {roof}", flush=True)
    rows = measure_all(cells, args.reps)
    return _report(rows, roof, args.json, args.png)


def _report(rows, roof, json_path, png):
    """Probe the roof again, keep the best of both, print the table against it, write JSON and PNG."""
    after = roofline()
    roof = {key: max(roof[key], after[key]) for key in roof}
    print(f"# after: {after}")
    for r in rows:  # the bound with the best roof of both probes
        r["bound"] = _bound(r, roof)
    print(f"# final, against the best roof of both probes: {roof}")
    print(HEADER)
    for r in rows:
        print(_line(r))
    data = {"roofline": roof, "cpu": _cpu(), "rows": rows}
    if json_path:
        Path(json_path).write_text(json.dumps(data, indent=1))
    if png:
        plot(data, png)
    return 0


HEADER = (f"{'mode':6} {'thr':>3} {'M':>4} {'K':>5} {'N':>6} | {'native':>7} {'blas':>7} {'ort':>7} GFLOP/s | "
          f"{'bound':>6} {'nat%':>5} {'blas%':>5} {'ort%':>5} | nat/blas nat/ort")


def _bound(r: dict, roof: dict) -> float:
    peak = roof[f"peak_{r['threads']}t"]
    return min(peak, roof[f"read_{r['threads']}t"] * intensity(r)) if r["mode"] == "stream" else peak


def _line(r: dict) -> str:
    ort, bound = r.get("ort_gflops"), r["bound"]
    ort_cells = ("-", "-", "-") if ort is None else (f"{ort:.1f}", f"{100 * ort / bound:.0f}", f"{r['native_gflops'] / ort:.2f}")
    return (f"{r['mode']:6} {r['threads']:3} {r['M']:4} {r['K']:5} {r['N']:6} | {r['native_gflops']:7.1f} "
            f"{r['blas_gflops']:7.1f} {ort_cells[0]:>7} GFLOP/s | {bound:6.1f} "
            f"{100 * r['native_gflops'] / bound:5.0f} {100 * r['blas_gflops'] / bound:5.0f} {ort_cells[1]:>5} | "
            f"{r['native_gflops'] / r['blas_gflops']:8.2f} {ort_cells[2]:>7}"
            f"{'  ERR ' + str(r['rel_err']) if r['rel_err'] > 1e-4 else ''}")


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
