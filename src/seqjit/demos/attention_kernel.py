"""``python -m seqjit demo --kernel``: blocked attention on a long input beside naive NumPy, time and peak memory.

Each engine runs in its own fresh Python process, so its peak memory is its own: after a first call
(timed, including Numba compilation or cache loading), the process resets its peak resident set
(``/proc/self/clear_refs``), makes one more call and reports ``VmHWM - VmRSS(before)`` from
``/proc/self/status`` as the call's peak extra memory (this sees BLAS and torch allocations, which
``tracemalloc`` does not). Then three warm calls give the median time. Linux only for the memory
column (elsewhere it shows n/a).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

_ENGINE_LABELS = {"naive": "naive numpy (full score matrix)"}


def naive_attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(D)) v, materialising the [B, H, L, L] score matrix (in place where possible)."""
    import numpy as np

    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s *= q.dtype.type(1 / np.sqrt(q.shape[-1]))
    if causal:
        s[..., np.triu(np.ones(s.shape[-2:], dtype=bool), k=s.shape[-1] - s.shape[-2] + 1)] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s, v)


def _memory_kb() -> dict[str, int]:
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("VmHWM:", "VmRSS:")):
                key, value = line.split(":")
                found[key] = int(value.split()[0])
    return found


def _engine(name: str):
    """``name`` -> (callable(q, k, v, causal) -> array, label). ``name`` is ``naive``, ``default``, a
    kernel backend, or ``module:function`` naming a peer engine outside the package (the benchmarks'
    torch SDPA, ``benchmarks/attention_peers.py``), whose function returns that pair; its module is
    found on ``sys.path`` (``run_engine(..., path=...)``)."""
    if name == "naive":
        return naive_attention, _ENGINE_LABELS[name]
    if ":" in name:
        import importlib

        module, function = name.split(":")
        return getattr(importlib.import_module(module), function)()
    from seqjit import kernels

    backend = None if name == "default" else name
    fn = kernels.get("attention", backend=backend)
    for candidate in ("numba", "cython", "reference"):  # which CPU backend the default is
        if backend is None:
            try:
                backend = candidate if kernels.get("attention", backend=candidate) is fn else None
            except kernels.KernelUnavailable:
                pass
    return (lambda q, k, v, causal: fn(q, k, v, causal=causal)), f"seqjit attention ({backend})"


def measure(engine: str, length: int, heads: int, dim: int, causal: bool, save: str | None = None,
            queries: int | None = None, batch: int = 1) -> dict:
    """Runs in the child process: time and peak memory of one engine on a seeded [batch, heads, length,
    dim] input (q of ``queries`` rows when given: a decode step is ``queries=1``). A warm time is the
    mean of as many calls as fill about 0.1 s (one call from 0.1 s up), so short calls are timed too."""
    import numpy as np

    import seqjit

    threads = int(os.environ.get("SEQJIT_DEMO_THREADS", seqjit.get_num_threads()))
    seqjit.set_num_threads(threads)
    fn, label = _engine(engine)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((batch, heads, length if queries is None else queries, dim), dtype=np.float32)
    k, v = (rng.standard_normal((batch, heads, length, dim), dtype=np.float32) for _ in range(2))
    start = time.perf_counter()
    out = fn(q, k, v, causal)
    first = time.perf_counter() - start
    if save:
        np.save(save, out)
    out = None
    peak_mb = None
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current VmRSS
        before = _memory_kb()["VmRSS"]
        out = fn(q, k, v, causal)
        peak_mb = (_memory_kb()["VmHWM"] - before) / 1024
    except OSError:
        pass
    start = time.perf_counter()
    out = fn(q, k, v, causal)
    calls = max(1, min(100_000, int(0.1 / max(time.perf_counter() - start, 1e-7))))
    warm = []
    for _ in range(3):
        out = None
        start = time.perf_counter()
        for _ in range(calls):
            out = fn(q, k, v, causal)
        warm.append((time.perf_counter() - start) / calls)
    return {"engine": label, "first_s": first, "warm_s": float(np.median(warm)), "peak_mb": peak_mb}


def run_engine(engine: str, length: int, heads: int, dim: int, causal: bool, save: str | None = None,
               threads: int | None = None, timeout: float = 600, path: str | None = None,
               queries: int | None = None, batch: int = 1) -> dict:
    """Run :func:`measure` in a fresh Python process and return its result; ``path``: a folder (or
    several, ``os.pathsep`` apart) put first on the child's module path (where a ``module:function``
    engine lives, or another checkout's seqjit)."""
    import seqjit

    env = dict(os.environ, SEQJIT_DEMO_THREADS=str(threads or seqjit.get_num_threads()))
    if path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(path), env.get("PYTHONPATH"))))
    code = (
        "import json, sys; from seqjit.demos.attention_kernel import measure; "
        f"print(json.dumps(measure({engine!r}, {length}, {heads}, {dim}, {causal!r}, {save!r}, {queries!r}, {batch!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"engine {engine!r} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_attention_demo(length: int = 4096, heads: int = 8, dim: int = 64, causal: bool = False) -> int:
    """Blocked attention (the default backend) beside naive NumPy; prints a table, returns an exit code."""
    import numpy as np

    for name, value in (("length", length), ("heads", heads), ("dim", dim)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    from seqjit.decoding.limits import available_memory

    # the naive engine's peak: q, k, v, the output and two [heads, length, length] score arrays
    need = 4 * (4 * heads * length * dim + 2 * heads * length * length)
    free = available_memory()
    if free is not None and need > free:
        raise ValueError(f"--length {length} --heads {heads} --dim {dim}: naive attention needs "
                         f"{need / 2**30:.1f} GiB, more than the {free / 2**30:.1f} GiB available now; lower --length")
    print(f"attention on a random [1, {heads}, {length}, {dim}] float32 input, causal={causal}, "
          f"one process per engine")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {e: os.path.join(tmp, f"{e}.npy") for e in ("default", "naive")}
        for engine, path in paths.items():
            rows.append(run_engine(engine, length, heads, dim, causal, save=path))
        diff = float(np.abs(np.load(paths["default"]) - np.load(paths["naive"])).max())
    print(f"{'engine':<34} {'first call':>11} {'warm (median of 3)':>19} {'peak extra memory':>18}")
    for r in rows:
        peak = "n/a" if r["peak_mb"] is None else f"{r['peak_mb']:.0f} MB"
        print(f"{r['engine']:<34} {r['first_s']:>9.3f} s {r['warm_s']:>17.3f} s {peak:>18}")
    agree = diff < 1e-4
    print(f"max |blocked - naive| = {diff:.2e} ({'agree' if agree else 'DISAGREE'})")
    return 0 if agree else 1
