"""Per-node and per-op timing of plan runs, printable as tables.

Two ways to collect::

    out = executor.run(feeds, profile=True); print(executor.last_profile.table())

    with seqjit.graph.profile() as prof:     # every plan run inside the block is timed
        model.step(state, tokens)
    print(prof.table(by="op"))              # or by="node"

Timing wraps each node's call with ``time.perf_counter`` (a profiled run is a little slower than a
plain one).
"""
from __future__ import annotations

from collections import defaultdict

_ACTIVE: list = []


def active() -> list:
    """The profiles collecting right now (empty almost always: one list check per run)."""
    return _ACTIVE


class Profile:
    """Accumulated ``(graph, node, op, backend, seconds)`` records over any number of runs."""

    def __init__(self):
        self.records: list = []
        self.runs: dict = defaultdict(int)

    def add(self, graph_name: str, records) -> None:
        self.runs[graph_name] += 1
        self.records.extend((graph_name, *r) for r in records)

    def __enter__(self) -> "Profile":
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.remove(self)

    @property
    def total(self) -> float:
        return sum(r[4] for r in self.records)

    def by_op(self) -> list:
        """[(op, backend, calls, seconds)] sorted by time, slowest first."""
        acc: dict = defaultdict(lambda: [0, 0.0])
        for _, _, op, backend, t in self.records:
            acc[(op, backend)][0] += 1
            acc[(op, backend)][1] += t
        return sorted(((op, b, c, t) for (op, b), (c, t) in acc.items()), key=lambda r: -r[3])

    def by_node(self) -> list:
        """[(graph, node, op, backend, calls, seconds)] sorted by time, slowest first."""
        acc: dict = defaultdict(lambda: [0, 0.0])
        for g, node, op, backend, t in self.records:
            acc[(g, node, op, backend)][0] += 1
            acc[(g, node, op, backend)][1] += t
        return sorted(((*k, c, t) for k, (c, t) in acc.items()), key=lambda r: -r[5])

    def table(self, by: str = "op", top: int | None = None) -> str:
        """A fixed-width text table; ``by`` is "op" or "node"; ``top`` keeps the slowest rows."""
        total = self.total or 1e-30
        runs = ", ".join(f"{g} x{n}" for g, n in self.runs.items())
        if by == "op":
            rows = self.by_op()[:top]
            head = f"{'op':<22}{'backend':<11}{'calls':>7}{'total ms':>11}{'mean us':>10}{'%':>7}"
            body = [f"{op:<22}{b:<11}{c:>7}{t * 1e3:>11.3f}{t / c * 1e6:>10.1f}{100 * t / total:>7.1f}"
                    for op, b, c, t in rows]
        elif by == "node":
            rows = self.by_node()[:top]
            head = f"{'node':<44}{'op':<18}{'backend':<11}{'calls':>7}{'total ms':>11}{'%':>7}"
            body = [f"{(g + ':' + n)[-43:]:<44}{op:<18}{b:<11}{c:>7}{t * 1e3:>11.3f}{100 * t / total:>7.1f}"
                    for g, n, op, b, c, t in rows]
        else:
            raise ValueError(f"by must be 'op' or 'node', got {by!r}")
        foot = f"total {total * 1e3:.3f} ms over runs: {runs or 'none'}"
        return "\n".join([head, "-" * len(head), *body, foot])

    def __str__(self) -> str:
        return self.table()


def profile() -> Profile:
    """A :class:`Profile` to use as a context manager."""
    return Profile()
