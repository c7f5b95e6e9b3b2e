"""Run the decoding benchmark, one process per engine, and write benchmarks/results/decoding.md.

    python benchmarks/decoding/run.py

Steps: build the cached models (workload.prepare_marian), run test_bench_generate.py once per
engine (``pytest -k <engine> --benchmark-json``: seqjit, ctranslate2, transformers, torch, and seqjit
again with OMP_WAIT_POLICY=PASSIVE), run profile_decode.py (seqjit's time per op, overheads, memory
floor; with and without PASSIVE), run the harness's Marian workloads (greedy and beam 4 against
CTranslate2, ONNX Runtime and transformers, each at its better of 1 and 2 threads:
``python -m benchmarks.harness --workload marian-greedy,marian-beam4``; the ONNX export under
``--ort-python``, skipped with the reason printed when that is missing), merge everything into one
markdown report (see report.py). $SEQJIT_BENCH_ROUNDS sets the timed rounds (default 10 at batch 1,
half at 16); ``--out`` writes elsewhere.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import workload as w  # noqa: E402
from report import render  # noqa: E402

#: label -> (pytest -k expression, extra environment). "seqjit+passive": seqjit with Numba's OpenMP
#: workers sleeping instead of spinning between parallel regions (a diagnosis, see the report)
PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}
ENGINES = {"seqjit": ("seqjit", {}), "seqjit+passive": ("seqjit", PASSIVE), "ctranslate2": ("ctranslate2", {}),
           "transformers": ("transformers", {}), "torch": ("torch", {})}
COMMAND = "python benchmarks/decoding/run.py"


def run_engine(label: str, tmp: Path) -> list:
    select, env = ENGINES[label]
    out = tmp / f"{label}.json"
    cmd = [sys.executable, "-m", "pytest", str(HERE / "test_bench_generate.py"), "-q", "-k", select,
           "--benchmark-enable", "--benchmark-only", f"--benchmark-json={out}", "--benchmark-columns=median,iqr,rounds"]
    print(f"== {label}: {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, **env})
    benches = json.loads(out.read_text())["benchmarks"]
    for b in benches:
        b["extra_info"]["engine"] = label
    return benches


def run_profile(env: dict, reps: int, batches: str, tmp: Path) -> dict:
    out = tmp / f"profile{len(env)}.json"
    cmd = [sys.executable, str(HERE / "profile_decode.py"), "--reps", str(reps), "--batches", batches, "--json", str(out)]
    print(f"== {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, **env})
    return json.loads(out.read_text())


def run_peers(ort_python: str | None, tmp: Path) -> str:
    """The harness's Marian tables (its Markdown), or "" with the failure printed."""
    out = tmp / "peers.md"
    cmd = [sys.executable, "-m", "benchmarks.harness", "--workload", "marian-greedy,marian-beam4", "--md", str(out),
           "--rounds", os.environ.get("SEQJIT_BENCH_ROUNDS", "2")] + (["--ort-python", ort_python] if ort_python else [])
    print(f"== {' '.join(cmd[1:])}", flush=True)
    done = subprocess.run(cmd, cwd=ROOT, check=False)
    if not out.exists():
        print(f"== the harness's Marian tables failed (exit {done.returncode})", flush=True)
        return ""
    return out.read_text()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def machine() -> dict:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
    get = lambda k: fields.get(k, "?").strip()  # noqa: E731
    versions = {p: _version(p) for p in ("seqjit", "ctranslate2", "onnxruntime", "transformers", "torch", "numpy", "numba")}
    return dict(cpu=get("Model name"), cpus=get("CPU(s)"), cores_per_socket=get("Core(s) per socket"),
                threads_per_core=get("Thread(s) per core"), affinity=len(os.sched_getaffinity(0)), versions=versions)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/decoding.md"))
    p.add_argument("--engines", default=",".join(ENGINES),
                   help=f"comma-separated subset of {', '.join(ENGINES)} for the greedy tables, or none")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--no-peers", action="store_true", help="skip the harness's Marian peers tables")
    p.add_argument("--ort-python", help="interpreter with optimum-onnx for the ONNX export (export_onnx.py)")
    args = p.parse_args(argv)
    start, load0 = time.time(), os.getloadavg()
    print(f"== models: {w.prepare_marian()}", flush=True)
    benches = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in [] if args.engines == "none" else args.engines.split(","):
            benches += run_engine(engine, Path(tmp))
        profiles = [] if args.no_profile else [run_profile(PASSIVE, 3, "1,16", Path(tmp)), run_profile({}, 1, "1", Path(tmp))]
        peers = "" if args.no_peers else run_peers(args.ort_python, Path(tmp))
    meta = dict(machine(), date=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
                command=" ".join(([f"SEQJIT_BENCH_ROUNDS={os.environ['SEQJIT_BENCH_ROUNDS']}"] if "SEQJIT_BENCH_ROUNDS" in os.environ else [])
                                 + [COMMAND] + sys.argv[1:]),
                minutes=(time.time() - start) / 60, load=(load0, os.getloadavg()))
    text = render(benches, profiles, meta, peers)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
