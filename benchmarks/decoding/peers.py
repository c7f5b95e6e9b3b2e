"""Marian (opus-mt-en-de size) against its peers, greedy and beam 4, batch 1 and 16: seqjit,
CTranslate2, ONNX Runtime (NumPy loop over the optimum export, and optimum's
ORTModelForSeq2SeqLM.generate) and transformers, each engine at its best of 1 and 2 threads, each
(engine, threads) in its own process. Part of run.py; alone::

    python benchmarks/decoding/peers.py [--rounds 5] [--engines seqjit,onnxruntime] [--ort-python PY]

Cells: tokens/s = batch x NEW_TOKENS / median time of one call (after an untimed warm-up call), at
the better thread count (``t=``). ``ids``: every engine's ids for the whole batch against
transformers' ``generate`` with the same search (agreement printed per case). ``ort-generate`` runs
under the export interpreter (export_onnx.py: optimum-onnx pins transformers < 4.58); the ONNX
Runtime engines are skipped, with the reason printed, when no export is available.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import workload as w  # noqa: E402

ENGINES = ("seqjit", "ctranslate2", "onnxruntime", "ort-generate", "transformers")
ORT = ("onnxruntime", "ort-generate")
CASES = [(beam, batch) for beam in (1, 4) for batch in (1, 16)]
THREADS = {"transformers": (2,)}     # the reference: ids, and a figure at 2 threads
BUDGET_S = 8.0                      # timed seconds per case at most, as long as it gets 3 rounds
LABEL = {"seqjit": "seqjit", "ctranslate2": "CTranslate2", "onnxruntime": "ONNX Runtime (NumPy loop)",
         "ort-generate": "ONNX Runtime (optimum generate)", "transformers": "transformers"}


def _set_threads(threads: int) -> None:
    try:
        import seqjit  # first: it sets OMP_WAIT_POLICY=PASSIVE before torch loads the OpenMP runtime

        seqjit.set_num_threads(threads)
    except ImportError:  # the export interpreter (ort-generate) has no seqjit
        pass
    import torch

    torch.set_num_threads(threads)


def child(engine: str, threads: int, rounds: int, make=w.marian_engine, sources=w.sources) -> dict:
    """Time every case with ``make(engine)``'s run on ``sources(batch)`` (hf_families.py passes its own)."""
    _set_threads(threads)
    run = make(engine)
    cases = []
    for beam, batch in CASES:
        srcs = sources(batch)
        t0 = time.perf_counter()
        run(srcs, beam)  # warm-up; sizes the rounds
        n = min(rounds, max(3, int(BUDGET_S / (time.perf_counter() - t0))))
        times = []
        for _ in range(n):
            t = time.perf_counter()
            ids = run(srcs, beam)
            times.append(time.perf_counter() - t)
        assert [len(x) for x in ids] == [w.NEW_TOKENS] * batch, f"{engine}: every engine must generate exactly NEW_TOKENS"
        cases.append(dict(beam=beam, batch=batch, tok_s=batch * w.NEW_TOKENS / statistics.median(times), rounds=n,
                          ids=[[int(t) for t in x] for x in ids]))
    return dict(engine=engine, threads=threads, cases=cases, load=os.getloadavg()[0])


def measure(engines, rounds: int, ort_python: str | None = None) -> list:
    """One child process per (engine, threads); rows of child() results (ONNX Runtime skipped without export)."""
    import export_onnx

    root = w.prepare_marian()
    if any(e in ORT for e in engines) and export_onnx.export(root, ort_python) is None:
        engines = [e for e in engines if e not in ORT]
    rows = []
    for engine in engines:
        py = export_onnx.export_python(ort_python) if engine == "ort-generate" else sys.executable
        for threads in THREADS.get(engine, (1, 2)):
            row = spawn([py, __file__, "--child", engine, str(threads), "--rounds", str(rounds)], engine, threads)
            rows += [row] if row else []
    return rows


def spawn(cmd: list, engine: str, threads: int, what: str = "peers") -> dict | None:
    """Run one child process (``cmd`` prints child()'s row as its last line); the row, or None with
    the failure printed."""
    print(f"== {what}: {engine}, {threads} thread(s)", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE,
                          env={**os.environ, "SEQJIT_BENCH_THREADS": str(threads)})
    if done.returncode != 0:
        print(f"== {what}: {engine} failed (exit {done.returncode}): "
              + " | ".join(done.stderr.strip().splitlines()[-3:]), flush=True)
        return None
    row = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"   load {row['load']:.1f}: " + ", ".join(f"beam {c['beam']} b{c['batch']} {c['tok_s']:.1f} tok/s ({c['rounds']} r)"
                                            for c in row["cases"]), flush=True)
    return row


def best(rows) -> dict:
    """(engine, beam, batch) -> (tok/s, threads, ids), the better of the engine's thread counts."""
    out = {}
    for r in rows:
        for c in r["cases"]:
            key = (r["engine"], c["beam"], c["batch"])
            if key not in out or c["tok_s"] > out[key][0]:
                out[key] = (c["tok_s"], r["threads"], c["ids"])
    return out


def agreement(b: dict, beam: int, batch: int) -> str:
    """Each engine's ids against transformers' for one case."""
    ref = b.get(("transformers", beam, batch))
    if ref is None:
        return "no transformers reference"
    notes = []
    for e in ENGINES[:-1]:
        if (e, beam, batch) in b:
            same = sum(x == y for x, y in zip(b[(e, beam, batch)][2], ref[2]))
            notes.append(f"{e} {same}/{batch}")
    return ", ".join(notes)


def table(rows) -> list:
    """Markdown lines: one row per case, tok/s (threads) per engine, seqjit's ratios, ids agreement."""
    b = best(rows)
    engines = [e for e in ENGINES if any(k[0] == e for k in b)]
    cell = lambda k: f"{b[k][0]:.1f} (t={b[k][1]})" if k in b else "-"  # noqa: E731
    ratio = lambda p, beam, batch: (f"{b[('seqjit', beam, batch)][0] / b[(p, beam, batch)][0]:.2f}x"  # noqa: E731
                                    if ("seqjit", beam, batch) in b and (p, beam, batch) in b else "-")
    lines = ["| search | batch | " + " | ".join(LABEL[e] for e in engines) + " | seqjit / ORT | seqjit / CT2 | ids equal to transformers |",
             "|---|---:|" + "---:|" * len(engines) + "---:|---:|---|"]
    for beam, batch in CASES:
        name = "greedy" if beam == 1 else f"beam {beam}"
        lines.append(f"| {name} | {batch} | " + " | ".join(cell((e, beam, batch)) for e in engines)
                     + f" | {ratio('onnxruntime', beam, batch)} | {ratio('ctranslate2', beam, batch)} | {agreement(b, beam, batch)} |")
    return lines


def section(rows) -> list:
    """The report's section (report.py)."""
    return ["## Marian against every peer: greedy and beam 4, best of 1 and 2 threads", "",
            "Each (engine, threads) in its own process; cells: tokens/s at the better thread count (`t=`; threads: "
            "seqjit.set_num_threads, ctranslate2 intra_threads, ONNX Runtime intra_op_num_threads with "
            "inter_op_num_threads 1, torch.set_num_threads), median of the timed calls after one warm-up call. ONNX "
            "Runtime: the optimum export (`text2text-generation-with-past`, float32, graph optimisations on) driven by a "
            "NumPy greedy / beam loop (benchmarks/decoding/ort_marian.py), and optimum's ORTModelForSeq2SeqLM.generate. "
            "transformers: the reference, 2 threads only. Beam search: no length penalty effect (every hypothesis has "
            f"{w.NEW_TOKENS} tokens), best hypothesis returned. Load average (1 min) at the end of each process: "
            + ", ".join(f"{r['engine']} t={r['threads']} {r.get('load', float('nan')):.1f}" for r in rows) + ".",
            "", *table(rows), ""]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="timed calls per case at most (fewer past BUDGET_S)")
    p.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {', '.join(ENGINES)}")
    p.add_argument("--ort-python", help="interpreter with optimum-onnx for the export and ort-generate (export_onnx.py)")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--child", nargs=2, metavar=("ENGINE", "THREADS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.rounds)))
        return 0
    load0 = os.getloadavg()
    rows = measure(args.engines.split(","), args.rounds, args.ort_python)
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
    print("\n".join(table(rows)))
    print(f"load average {load0[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
