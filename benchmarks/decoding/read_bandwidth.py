"""Read bandwidth of one core by working-set size: is a batch-1 RNN step's 34 MB of float32 weights
read from the last-level cache or from DRAM, and how fast can one core read it at all?

Each working set (a float32 array) is read whole, again and again (hot: the previous pass left in
the caches whatever fits), by two kernels compiled with Numba for this CPU:

- ``sum``: a vectorised sum (16 independent accumulators), the plain read floor;
- ``gemv``: y = W x over W [N, 500] (the shape of the RNN's matrices), one multiply-add per weight
  read, as a batch-1 step does.

    python benchmarks/decoding/read_bandwidth.py [--sizes 1,2,8,16,34,64,256,1024] [--seconds 0.3]

One table: MB, GB/s of each kernel (best pass of ``--seconds`` of passes), and the time one pass
takes; the load average before and after. 1 thread (Numba's loops here are serial).
"""
from __future__ import annotations

import argparse
import os
import time

import numba
import numpy as np

K = 500  # the RNN's hidden width: rows of W are 2000 bytes


@numba.njit(fastmath=True, cache=False)
def read_sum(a):
    acc = np.zeros(16, np.float32)
    n = a.size - a.size % 16
    for i in range(0, n, 16):
        for j in range(16):
            acc[j] += a[i + j]
    return acc.sum()


@numba.njit(fastmath=True, cache=False)
def gemv(w, x, y):
    for i in range(w.shape[0]):
        s = np.float32(0.0)
        for k in range(w.shape[1]):
            s += w[i, k] * x[k]
        y[i] = s


def best_seconds(fn, seconds: float) -> float:
    fn()  # warm: compiled, and the working set touched once
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,2,4,8,16,34,64,128,256,1024", help="working sets in MB, comma-separated")
    ap.add_argument("--seconds", type=float, default=0.3, help="time spent on each size and kernel")
    args = ap.parse_args()
    print(f"one core, hot repeated passes; load {os.getloadavg()[0]:.2f}")
    print("| MB | sum GB/s | sum ms/pass | gemv [N, 500] GB/s | gemv ms/pass |")
    print("|---:|---:|---:|---:|---:|")
    x = np.ones(K, np.float32)
    for mb in (float(s) for s in args.sizes.split(",")):
        rows = max(1, int(mb * 1e6 / (4 * K)))
        w = np.random.default_rng(0).standard_normal((rows, K), dtype=np.float32)
        y = np.empty(rows, np.float32)
        flat = w.reshape(-1)
        t_sum = best_seconds(lambda: read_sum(flat), args.seconds)
        t_gemv = best_seconds(lambda: gemv(w, x, y), args.seconds)
        print(f"| {w.nbytes / 1e6:.1f} | {w.nbytes / t_sum / 1e9:.1f} | {1e3 * t_sum:.3f} | {w.nbytes / t_gemv / 1e9:.1f} "
              f"| {1e3 * t_gemv:.3f} |")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
