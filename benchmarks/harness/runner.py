"""Spawn-per-engine measurement: a worker process per (engine, thread count) per round, the model
loaded inside it; engines alternate within each round, so that all see the same moments of a shared
host; a worker times calls for at least ``seconds`` (and ``min_calls`` calls) after one untimed
warm-up call per batch, and reports the median call.

    python -m benchmarks.harness.runner '<spec JSON>'     # one worker (what spawn() starts)
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import ROOT, host
from .engines import ENGINES


def measure(run, sources: list, count: int, seconds: float, min_calls: int) -> dict:
    """Median wall and CPU time of ``run(sources)`` -> {"rate", "cpu_rate", "calls", "ids"} (``count``:
    the tokens or words one call makes)."""
    ids = run(sources)
    walls, cpus, end = [], [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(walls) < min_calls:
        t0, c0 = time.perf_counter(), time.process_time()
        ids = run(sources)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"rate": count / statistics.median(walls), "cpu_rate": count / max(statistics.median(cpus), 1e-9),
            "calls": len(walls), "ids": [[int(t) for t in x] for x in ids]}


def worker(spec: dict) -> dict:
    """In the worker process: build the engine, time every batch; the row spawn() reads back."""
    from . import engines, models

    m = models.MODELS[spec["model"]]
    run = engines.build(spec["engine"], spec["model"], spec["search"], spec["threads"])
    out = {}
    for b in spec["batches"]:
        srcs = m.sources(b)
        r = measure(run, srcs, b if m.per_source else b * m.new_tokens, spec["seconds"], spec["min_calls"])
        if [len(x) for x in r["ids"]] != [m.new_tokens] * b:
            raise SystemExit(f"{spec['engine']}: every engine must generate exactly {m.new_tokens} tokens per source")
        out[str(b)] = r
    return {"batches": out, "load": host.load(), "peak_rss_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not carried over from the parent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


#: what caps each peer's instruction set alongside SEQJIT_ISA (the user's own settings win): CTranslate2's
#: kernels, the MKL and oneDNN it calls, PyTorch's ATen kernels, OpenBLAS (NumPy's, scipy's); ONNX
#: Runtime's MLAS has no such switch and runs the host's best
PEER_ISA = {
    "avx2": {"CT2_FORCE_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell"},
    "baseline": {"CT2_FORCE_CPU_ISA": "GENERIC", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
                 "ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Nehalem"},
}


def spawn(spec: dict, python: str, checkout: Path | None = None, isa: str | None = None,
          timeout: float | None = None) -> dict:
    """One worker; its row, or ``{"error": ...}`` with the end of its stderr (or the timeout it ran past)."""
    env = dict(os.environ)
    if not spec["engine"].startswith("seqjit"):
        env.pop("OMP_WAIT_POLICY", None)
    if isa:
        env["SEQJIT_ISA"] = isa
        env.update({k: v for k, v in PEER_ISA.get(isa, {}).items() if k not in os.environ})
    if checkout is not None:  # another checkout's seqjit (its in-place build)
        env["PYTHONPATH"] = os.pathsep.join([str(checkout / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    try:
        done = subprocess.run([python, "-m", "benchmarks.harness.runner", json.dumps(spec)], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s (--timeout)"}
    except OSError as exc:  # no such interpreter (the export one)
        return {"error": f"cannot start {python}: {exc.strerror}"}
    if done.returncode != 0:
        return {"error": " | ".join(done.stderr.strip().splitlines()[-3:]) or f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_workload(workload, engines: list, threads: list, rounds: int, seconds: float, min_calls: int,
                 batches: tuple, old: Path | None = None, isa: str | None = None, export_python: str = "",
                 timeout: float | None = None, python: str = sys.executable, log=print) -> list:
    """Every (engine, threads) once per round, in turn; the rows the workers gave (and the failures).
    ``old``: another checkout whose seqjit runs as well, as ``<engine>@old`` (a same-run A/B);
    ``python``: the workers' interpreter; ``export_python``: that of the engines needing the ONNX export's."""
    rows = []
    for r in range(rounds):
        for engine in engines:
            py = export_python if ENGINES[engine].export_python else python
            for name, checkout in [(engine, None)] + ([(f"{engine}@old", old)] if old and engine.startswith("seqjit") else []):
                for t in threads:
                    spec = dict(model=workload.model, engine=engine, search=workload.search, threads=t,
                                batches=list(batches), seconds=seconds, min_calls=min_calls)
                    row = dict(engine=name, threads=t, round=r, **spawn(spec, py, checkout, isa, timeout))
                    rows.append(row)
                    log(f"== {workload.name} round {r + 1}/{rounds}: {name} at {t} thread(s): "
                        + (f"failed: {row['error']}" if "error" in row else
                           ", ".join(f"batch {b} {v['rate']:,.1f}" for b, v in row["batches"].items())
                           + f" (load {row['load']:.1f})"))
    return rows


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(json.dumps(worker(json.loads(argv[0]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
