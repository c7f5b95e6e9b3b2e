"""``python -m benchmarks.harness --workload NAME[,NAME...]``: run workloads, print (and write) the tables.

``--smoke``: one round, one thread, the first batch size, a single timed call per worker: checks
that every engine of the workload runs, in seconds (tests/benchmarks/test_harness_smoke.py).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

from . import floor, host, models, runner, table
from .engines import ENGINES, QUANTIZED, missing
from .workloads import GROUPS, WORKLOADS, select


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.harness", description=__doc__.split("\n")[0])
    p.add_argument("--workload", help=f"comma-separated: {', '.join(WORKLOADS)}; groups {', '.join(GROUPS)}; all")
    p.add_argument("--engines", help=f"keep only these (comma-separated) of {', '.join(ENGINES)}")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=2.0, help="timed seconds per worker and batch (at least)")
    p.add_argument("--min-calls", type=int, default=5, help="timed calls per worker and batch (at least)")
    p.add_argument("--batches", help="comma-separated batch sizes instead of the workload's")
    p.add_argument("--isa", help="SEQJIT_ISA for the workers (avx512, avx2, baseline: seqjit's lower variants)")
    p.add_argument("--old", help="another checkout, built in place, whose seqjit runs as well (engine@old)")
    p.add_argument("--ort-python", help="the export interpreter (default $SEQJIT_ORT_EXPORT_PYTHON, see export_onnx.py)")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds a worker may take, model load included")
    p.add_argument("--md", help="write the Markdown tables here too")
    p.add_argument("--json", help="write every worker's row here")
    p.add_argument("--smoke", action="store_true", help="1 round, 1 thread, first batch, 1 call: does it run")
    p.add_argument("--list", action="store_true", help="print the workloads and engines")
    args = p.parse_args(argv)
    try:
        args.batches = tuple(int(b) for b in args.batches.split(",")) if args.batches else None
    except ValueError:
        p.error(f"--batches {args.batches!r}: comma-separated integers")
    if (min(args.threads) < 1 or args.rounds < 1 or args.min_calls < 1 or min(args.batches or [1]) < 1
            or args.seconds < 0 or args.timeout <= 0):
        p.error("--threads, --rounds, --min-calls, --batches and --timeout take positive numbers, --seconds one >= 0")
    if args.smoke:
        args.rounds, args.threads, args.seconds, args.min_calls = 1, [1], 0.0, 1
    if not args.list and not args.workload:
        p.error("--workload is required (--list names them)")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.list:
        for w in WORKLOADS.values():
            print(f"{w.name:15} {', '.join(w.engines)}: {w.about}")
        print("groups: " + "; ".join(f"{g}: {', '.join(n)}" for g, (n, _) in GROUPS.items()))
        return 0
    from benchmarks.decoding import export_onnx

    keep = set(args.engines.split(",")) if args.engines else None
    unknown = (keep or set()) - set(ENGINES)
    if unknown:
        raise SystemExit(f"--engines: unknown engine(s) {', '.join(sorted(unknown))}; known: {', '.join(ENGINES)}")
    old = Path(args.old).resolve() if args.old else None
    if old is not None and not (old / "src" / "seqjit" / "__init__.py").exists():
        raise SystemExit(f"--old {args.old}: no src/seqjit/__init__.py there (a seqjit checkout, built in place)")
    notes = []
    if old is not None and args.isa and not (old / "kernels" / "_isa.py").exists():
        notes.append(f"- the old checkout predates SEQJIT_ISA: its columns ran this host's best ISA, not {args.isa}")
        print("== " + notes[-1][2:], flush=True)
    ort_python = export_onnx.export_python(args.ort_python)
    info = host.cpu()
    command = "python -m benchmarks.harness " + shlex.join(argv)
    print(f"== {host.describe(info)}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    results, roof = [], None
    for w, group_keep in select(args.workload):
        engines = [e for e in w.engines if (keep is None or e in keep) and (group_keep is None or e in group_keep)]
        skipped = {e: why for e in engines if (why := missing(e))}
        engines = [e for e in engines if e not in skipped]
        if not engines:
            print(f"== {w.name}: no engine left to run", flush=True)
            continue
        python = models.toolkits_python() if models.MODELS[w.model].toolkits else sys.executable
        if not os.path.exists(python):
            print(f"== {w.name}: skipped: no toolkit interpreter at {python} (make test-toolkits builds it; "
                  "or set $SEQJIT_TOOLKITS_PYTHON)", flush=True)
            continue
        onnx = any(ENGINES[e].onnx for e in engines)
        schemes = [s for e, s in QUANTIZED.items() if e in engines]
        if not models.prepare(w.model, onnx=onnx, schemes=schemes, ort_python=ort_python):
            skipped.update({e: "no ONNX export (see benchmarks/decoding/export_onnx.py)" for e in engines
                            if ENGINES[e].onnx})
            engines = [e for e in engines if not ENGINES[e].onnx]
        batches = args.batches or w.batches
        batches = batches[:1] if args.smoke else batches
        rows = runner.run_workload(w, engines, args.threads, args.rounds, args.seconds, args.min_calls, batches,
                                   old=old, isa=args.isa, export_python=ort_python, python=python,
                                   timeout=args.timeout)
        results.append(dict(workload=asdict(w), host=host.describe(info), cpu=info, rounds=args.rounds,
                            seconds=args.seconds, threads=args.threads, isa=args.isa or os.environ.get("SEQJIT_ISA"),
                            batches=list(batches), unit=models.MODELS[w.model].unit, command=command,
                            skipped=skipped, rows=rows, notes=notes))
        if w.model == "marian" and w.search == "greedy" and 1 in batches and not args.smoke:
            roof = roof or floor.roofline()
            config = json.loads((models.root(w.model) / "hf" / "config.json").read_text())
            results[-1].update(roofline=roof, floor=floor.lines(config, table.best(rows), roof))
        print("\n" + table.markdown(results[-1]), flush=True)
    table.write(results, args.md, args.json)
    failed = [r for res in results for r in res["rows"] if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
