"""One benchmark harness for seqjit's decoding against its peers (docs/benchmarks.md).

A workload (:mod:`.workloads`: a model, a search, batch sizes, engines) is run by :mod:`.runner`:
one worker process per engine and thread count (the model loaded inside it), engines alternating
within each round so that all see the same moments of a shared host, each worker's median over its
timed calls, the median over rounds, the better thread count per engine; :mod:`.table` writes the
Markdown and JSON, naming the CPU and its caches. Engines are looked up by name in :mod:`.engines`.

    python -m benchmarks.harness --workload marian-greedy [--rounds 2 --seconds 2 --threads 1 2]
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# ``python -m`` puts the checkout first on the path, where its ``kernels/`` folder would shadow the
# ``kernels`` distribution that transformers imports when installed: keep the checkout, last.
_here = [p for p in sys.path if p in ("", ".") or Path(p or ".").resolve() == ROOT]
sys.path[:] = [p for p in sys.path if p not in _here] + [str(ROOT)]
