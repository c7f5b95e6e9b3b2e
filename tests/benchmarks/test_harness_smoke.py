"""The benchmark harness (``python -m benchmarks.harness``, docs/benchmarks.md): its smoke mode runs
seqjit and the NumPy loop on the G2P-sized GRU (and CTranslate2 on the tiny Transformer when it is
installed), each in a worker process, and writes the Markdown and JSON tables; its best-of-threads
and median arithmetic on rows made up here."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the source tree, for the workers, only where it is built in place (src/seqjit/kernels linked);
#: otherwise the installed seqjit (a fresh clone after pip install: src has no kernels there)
_IN_PLACE = [str(ROOT / "src")] if (ROOT / "src" / "seqjit" / "kernels").exists() else []


def _harness_table():
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # last: the checkout's kernels/ must not shadow an installed `kernels`
    from benchmarks.harness import table

    return table


def test_smoke_runs_every_engine_and_writes_both_tables(tmp_path):
    ct2 = importlib.util.find_spec("ctranslate2") is not None
    workloads, engines = ("tiny-greedy,gru", "seqjit,numpy,ctranslate2") if ct2 else ("gru", "seqjit,numpy")
    env = dict(os.environ, SEQJIT_BENCH_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [*_IN_PLACE, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "benchmarks.harness", "--workload", workloads, "--engines", engines,
                           "--smoke", "--md", str(tmp_path / "t.md"), "--json", str(tmp_path / "t.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = {r["workload"]["name"]: r for r in json.loads((tmp_path / "t.json").read_text())}
    assert set(results) == set(workloads.split(","))
    gru = {r["engine"]: r for r in results["gru"]["rows"]}
    assert set(gru) == {"seqjit", "numpy"} and all(r["threads"] == 1 for r in gru.values())
    for r in gru.values():
        (batch, m), = r["batches"].items()
        assert batch == "1" and m["rate"] > 0 and m["calls"] == 1 and len(m["ids"]) == 1 and len(m["ids"][0]) == 8
    # the NumPy loop is an independent implementation of the same greedy decode: same ids
    assert gru["seqjit"]["batches"]["1"]["ids"] == gru["numpy"]["batches"]["1"]["ids"]
    if ct2:
        assert {r["engine"] for r in results["tiny-greedy"]["rows"]} == {"seqjit", "ctranslate2"}
    md = (tmp_path / "t.md").read_text()
    assert "L2 " in md and "L3 " in md and "| batch | seqjit | NumPy loop | seqjit / NumPy loop |" in md


def test_a_worker_past_its_timeout_is_a_failed_row_not_a_hang(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [*_IN_PLACE, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "benchmarks.harness", "--workload", "gru", "--engines", "numpy", "--smoke",
                           "--timeout", "0.05", "--json", str(tmp_path / "t.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    (result,) = json.loads((tmp_path / "t.json").read_text())
    assert [r["error"] for r in result["rows"]] == ["timed out after 0.05 s (--timeout)"]
    assert "- failed: numpy at 1 thread(s): timed out after 0.05 s" in done.stdout


def test_best_of_threads_takes_the_better_median_over_rounds():
    table = _harness_table()

    def row(threads, rnd, rate):
        return dict(engine="seqjit", threads=threads, round=rnd, load=0.0, peak_rss_mb=1.0,
                    batches={"4": dict(rate=rate, cpu_rate=rate, calls=5, ids=[[1]] * 4)})

    # 1 thread: rounds 10, 30, 11 -> median 11; 2 threads: 12, 2, 13 -> median 12 (its mean, 9, is lower)
    rows = [row(1, 0, 10.0), row(2, 0, 12.0), row(1, 1, 30.0), row(2, 1, 2.0), row(1, 2, 11.0), row(2, 2, 13.0)]
    best = table.best(rows)
    assert best[("seqjit", 4)]["threads"] == 2 and best[("seqjit", 4)]["rate"] == 12.0
