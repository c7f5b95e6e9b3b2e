"""``make bench`` runs what it says: every pytest-benchmark file of the tree (benchmarks/**/test_bench_*.py)
is in its BENCH_PYTEST list, every file listed exists, and BENCH_WORKLOADS names the harness's workloads
or groups (``make -n`` prints the commands without running them)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_bench_lists_every_pytest_benchmark_and_known_workloads():
    dry = subprocess.run(["make", "-n", "bench"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    pytest_line = next(ln for ln in dry.splitlines() if " -m pytest " in ln)
    listed = {w for w in pytest_line.split() if w.endswith(".py")}
    present = {str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("test_bench_*.py")}
    assert listed == present
    harness_line = next(ln for ln in dry.splitlines() if " -m benchmarks.harness " in ln)
    workloads = harness_line.split("--workload")[1].split()[0]
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # last: the checkout's kernels/ must not shadow an installed `kernels`
    from benchmarks.harness.workloads import select

    assert select(workloads)  # raises SystemExit on an unknown name
