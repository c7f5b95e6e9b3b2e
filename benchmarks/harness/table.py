"""The one table writer: per workload, each engine's figure at its better thread count (the median
over rounds of each worker's median call), the subject's ratio to every peer, the ids agreement with
the reference engine; Markdown for reading, JSON with every worker's row for later analysis."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from .engines import ENGINES


def best(rows: list) -> dict:
    """(engine, batch) -> {"rate", "threads", "ids", "rss"}: the thread count whose median over rounds is best."""
    per: dict = {}
    for row in rows:
        for b, v in row.get("batches", {}).items():
            per.setdefault((row["engine"], int(b)), {}).setdefault(row["threads"], []).append((v, row))
    out = {}
    for key, by_threads in per.items():
        medians = {t: statistics.median(v["rate"] for v, _ in runs) for t, runs in by_threads.items()}
        t = max(medians, key=medians.get)
        first, row = by_threads[t][0]
        out[key] = {"rate": medians[t], "threads": t, "ids": first["ids"], "rss": row["peak_rss_mb"]}
    return out


def label(engine: str) -> str:
    base, _, old = engine.partition("@")
    return ENGINES[base].label + (f" ({old})" if old else "")


def markdown(result: dict) -> str:
    """One workload's section: heading, how it was measured, the table, failures."""
    w, rows = result["workload"], result["rows"]
    b = best(rows)
    engines = [e for e in dict.fromkeys(r["engine"] for r in rows) if any(k[0] == e for k in b)]
    subject, peers = (engines[0], engines[1:]) if engines else (None, [])
    loads = [r["load"] for r in rows if "load" in r]
    lines = [f"### {w['name']}: {w['about']}", "",
             f"{result['host']}; {result['rounds']} round(s) of {result['seconds']:g} s per worker, threads "
             f"{'/'.join(map(str, result['threads']))} (the better shown as `t=`), SEQJIT_ISA={result['isa'] or 'unset'}"
             f"{' (the peers capped alike, ONNX Runtime excepted: runner.PEER_ISA)' if result['isa'] else ''}, "
             f"load {min(loads, default=0):.1f}-{max(loads, default=0):.1f}; median {result['unit']}. "
             f"`{result['command']}`", ""]
    ref = w["reference"] if any(k[0] == w["reference"] for k in b) else None
    head = ["batch"] + [label(e) for e in engines] + [f"{label(subject)} / {label(p)}" for p in peers]
    head += [f"ids = {label(ref)}"] if ref else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for batch in result["batches"]:
        cells = [str(batch)] + [f"{b[(e, batch)]['rate']:,.1f} (t={b[(e, batch)]['threads']})" if (e, batch) in b
                                else "-" for e in engines]
        cells += [f"{b[(subject, batch)]['rate'] / b[(p, batch)]['rate']:.2f}x"
                  if (subject, batch) in b and (p, batch) in b else "-" for p in peers]
        if ref:
            r_ids = b.get((ref, batch), {}).get("ids")
            cells.append(", ".join(f"{e} {sum(x == y for x, y in zip(b[(e, batch)]['ids'], r_ids))}/{batch}"
                                   for e in engines if e != ref and (e, batch) in b and r_ids is not None))
        lines.append("| " + " | ".join(cells) + " |")
    rss = {e: max(v["rss"] for k, v in b.items() if k[0] == e) for e in engines}
    lines += ["", "Peak resident memory per worker: " + ", ".join(f"{label(e)} {v:,.0f} MB" for e, v in rss.items()) + "."
              ] if rss else [""]
    lines += result.get("floor", [])
    failed = {(r["engine"], r["threads"]): r["error"] for r in rows if "error" in r}
    lines += [f"- failed: {e} at {t} thread(s): {msg}" for (e, t), msg in failed.items()]
    lines += [f"- skipped: {e}: {why}" for e, why in result["skipped"].items()]
    lines += result.get("notes", [])
    return "\n".join(lines) + "\n"


def write(results: list, md: str | None, js: str | None) -> str:
    text = "\n".join(markdown(r) for r in results)
    if md:
        Path(md).parent.mkdir(parents=True, exist_ok=True)
        Path(md).write_text(text)
    if js:
        Path(js).parent.mkdir(parents=True, exist_ok=True)
        Path(js).write_text(json.dumps(results, indent=1))
    return text
