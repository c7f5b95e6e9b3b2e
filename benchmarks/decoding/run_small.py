"""Small-model decoding against the peers (issue 11): every engine in its own process at 1 and 2
threads, the best setting of each reported, ratios taken from the same run.

    python benchmarks/decoding/run_small.py [--out benchmarks/results/small_models.md] [--models tiny,gru] [--hog]

Tiny Transformer: seqjit vs CTranslate2 float32 and transformers (tokens/s); ``tiny-sample``: the
same decode by top-k 10 sampling. GRU seq2seq: seqjit vs a plain NumPy loop and PyTorch (words/s;
batch 1 is one word per call).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENGINES = {"tiny": ("seqjit", "ctranslate2", "transformers"), "tiny-sample": ("seqjit", "ctranslate2", "transformers"),
           "gru": ("seqjit", "numpy", "torch")}
PEER = {"tiny": "ctranslate2", "tiny-sample": "ctranslate2", "gru": "numpy"}


def run_one(model: str, engine: str, threads: int, tmp: Path) -> list:
    out = tmp / f"{model}-{engine}-{threads}.json"
    env = {**os.environ, "SEQJIT_SMALL": f"{model}:{engine}:{threads}"}
    if engine != "seqjit":
        env.pop("OMP_WAIT_POLICY", None)
    cmd = [sys.executable, "-m", "pytest", str(HERE / "test_bench_small.py"), "-q", "-p", "no:randomly",
           "--benchmark-enable", "--benchmark-only", f"--benchmark-json={out}"]
    print(f"== {model} {engine} threads={threads}", flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["benchmarks"]


def table(results: list) -> str:
    rows, best = [], {}
    for b in results:
        e = b["extra_info"]
        rate = e["items" if e["model"] == "gru" else "tokens"] / b["stats"]["median"]
        key = (e["model"], e["batch"], e["engine"])
        rows.append((e["model"], e["batch"], e["engine"], e["threads"], rate))
        if key not in best or rate > best[key][1]:
            best[key] = (e["threads"], rate)
    lines = ["| model | batch | engine | 1 thread | 2 threads | best | seqjit / peer (best vs best) |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for (model, batch, engine), (threads, rate) in sorted(best.items()):
        per = {t: r for m, bb, e, t, r in rows if (m, bb, e) == (model, batch, engine)}
        peer = best.get((model, batch, PEER[model]))
        ratio = f"{best[(model, batch, 'seqjit')][1] / peer[1]:.2f}x" if engine == "seqjit" and peer else ""
        unit = "words/s" if model == "gru" else "tok/s"
        lines.append(f"| {model} | {batch} | {engine} | {per.get(1, 0):,.0f} | {per.get(2, 0):,.0f} | "
                     f"{rate:,.0f} {unit} (t={threads}) | {ratio} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/small_models.md"))
    p.add_argument("--models", default="tiny,gru")
    p.add_argument("--engines", default=None, help="comma-separated subset of the engines (default: all)")
    p.add_argument("--hog", action="store_true",
                   help="keep one CPU-bound process (`while True: pass`) running on the machine meanwhile")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    import small_workload

    small_workload.prepare_tiny()
    results = []
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.hog else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for model in args.models.split(","):
                for engine in ENGINES[model]:
                    if args.engines and engine not in args.engines.split(","):
                        continue
                    for threads in (1, 2):
                        results += run_one(model, engine, threads, Path(tmp))
    finally:
        if hog is not None:
            hog.kill()
    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if l.startswith("Model name")), "?")
    text = (f"# Small-model decoding (issue 11)\n\n`python benchmarks/decoding/run_small.py`, "
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu}, {os.cpu_count()} CPUs, "
            f"load {os.getloadavg()[0]:.1f}{', with a CPU-bound process running throughout (--hog)' if args.hog else ''}. Medians of {os.environ.get('SEQJIT_BENCH_ROUNDS', '30')} rounds, each engine "
            f"in its own process at 1 and 2 threads; the ratio compares each engine's best setting.\n\n"
            + table(results) + "\n")
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
