"""Start-up cost of seqjit: ``import seqjit`` and each kernel's first call, cold and warm.

Cold: an empty Numba cache (a fresh NUMBA_CACHE_DIR), so the first call compiles. Warm: the same
cache directory again, so the first call loads compiled code. Each measurement runs in a fresh
Python process. Cython kernels are compiled at install and have no cold/warm difference.

    python benchmarks/startup_latency.py [--backends numba cython] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

#: op -> Python source building its arguments (small shapes: we time compile/load, not compute)
EXAMPLES = {
    "softmax": "args = (rng.standard_normal((4, 64)).astype('f4'),); kw = {}",
    "log_softmax": "args = (rng.standard_normal((4, 64)).astype('f4'),); kw = {}",
    "attention": "q = rng.standard_normal((1, 2, 16, 8)).astype('f4'); args = (q, q, q); kw = {}",
    "additive_attention": (
        "B, L, A, Dq, Dk = 2, 5, 8, 6, 7\n"
        "args = (rng.standard_normal((B, Dq)).astype('f4'), rng.standard_normal((B, L, A)).astype('f4'),"
        " rng.standard_normal((B, L, Dk)).astype('f4'), rng.standard_normal((A, Dq)).astype('f4'),"
        " rng.standard_normal(A).astype('f4')); kw = {}"
    ),
    "gru": (
        "I, H = 8, 16\n"
        "p = {'weight_ih_l0': rng.standard_normal((3*H, I)).astype('f4'), 'weight_hh_l0': rng.standard_normal((3*H, H)).astype('f4'),"
        " 'bias_ih_l0': rng.standard_normal(3*H).astype('f4'), 'bias_hh_l0': rng.standard_normal(3*H).astype('f4')}\n"
        "args = (rng.standard_normal((5, 2, I)).astype('f4'), p); kw = {}"
    ),
    "lstm": (
        "I, H = 8, 16\n"
        "p = {'weight_ih_l0': rng.standard_normal((4*H, I)).astype('f4'), 'weight_hh_l0': rng.standard_normal((4*H, H)).astype('f4'),"
        " 'bias_ih_l0': rng.standard_normal(4*H).astype('f4'), 'bias_hh_l0': rng.standard_normal(4*H).astype('f4')}\n"
        "args = (rng.standard_normal((5, 2, I)).astype('f4'), p); kw = {}"
    ),
    "gru_cell": (
        "I, H = 8, 16\n"
        "args = (rng.standard_normal((2, I)).astype('f4'), rng.standard_normal((2, H)).astype('f4'),"
        " rng.standard_normal((3*H, I)).astype('f4'), rng.standard_normal((3*H, H)).astype('f4')); kw = {}"
    ),
    "lstm_cell": (
        "I, H = 8, 16\n"
        "args = (rng.standard_normal((2, I)).astype('f4'), rng.standard_normal((2, H)).astype('f4'),"
        " rng.standard_normal((2, H)).astype('f4'), rng.standard_normal((4*H, I)).astype('f4'),"
        " rng.standard_normal((4*H, H)).astype('f4')); kw = {}"
    ),
    "layer_norm": "args = (rng.standard_normal((4, 32)).astype('f4'), np.ones(32, 'f4'), np.zeros(32, 'f4')); kw = {}",
    "linear": "args = (rng.standard_normal((4, 32)).astype('f4'), rng.standard_normal((16, 32)).astype('f4'), np.zeros(16, 'f4')); kw = {'activation': 'relu'}",
    "relu": "args = (rng.standard_normal((4, 32)).astype('f4'),); kw = {}",
    "gelu": "args = (rng.standard_normal((4, 32)).astype('f4'),); kw = {}",
    "silu": "args = (rng.standard_normal((4, 32)).astype('f4'),); kw = {}",
    "tanh": "args = (rng.standard_normal((4, 32)).astype('f4'),); kw = {}",
    "embedding": "args = (np.array([[1, 2, 3]]), rng.standard_normal((10, 8)).astype('f4')); kw = {}",
    "sinusoidal_positions": "args = (16, 8); kw = {}",
}

_PROBE = """
import time, json
t0 = time.perf_counter()
import numpy as np
import seqjit
from seqjit import kernels
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
{setup}
f = kernels.get({op!r}, backend={backend!r})
t1 = time.perf_counter()
f(*args, **kw)
t_first = time.perf_counter() - t1
steady = []
for _ in range(7):
    t2 = time.perf_counter()
    f(*args, **kw)
    steady.append(time.perf_counter() - t2)
t_second = sorted(steady)[3]
print(json.dumps(dict(import_s=t_import, first_s=t_first, second_s=t_second)))
"""


def probe(op: str, backend: str, cache_dir: str) -> dict | str:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    code = _PROBE.format(setup=EXAMPLES[op], op=op, backend=backend)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def import_time(repeats: int = 5) -> float:
    code = "import time; t=time.perf_counter(); import seqjit; print(time.perf_counter()-t)"
    times = sorted(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout) for _ in range(repeats))
    return times[len(times) // 2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["numba", "cython"])
    parser.add_argument("--ops", nargs="+", default=sorted(EXAMPLES))
    parser.add_argument("--out", help="also write the markdown table here")
    args = parser.parse_args(argv)
    lines = [f"`import seqjit`: {import_time() * 1000:.0f} ms (median of 5 fresh processes)", "",
             "| op | backend | first call cold (empty Numba cache) | first call warm (cached) | later calls (median of 7) |",
             "|---|---|---|---|---|"]
    for op in args.ops:
        for backend in args.backends:
            with tempfile.TemporaryDirectory() as cache:
                cold = probe(op, backend, cache)
                warm = probe(op, backend, cache)
            if isinstance(cold, str) or isinstance(warm, str):
                lines.append(f"| {op} | {backend} | unavailable: {cold if isinstance(cold, str) else warm} | | |")
                continue
            lines.append(f"| {op} | {backend} | {cold['first_s'] * 1000:.0f} ms | {warm['first_s'] * 1000:.0f} ms | {warm['second_s'] * 1000:.2f} ms |")
        print("\n".join(lines[-len(args.backends):]), flush=True)
    text = "\n".join(lines)
    print("\n" + text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
