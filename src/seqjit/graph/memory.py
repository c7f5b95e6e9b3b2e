"""Buffer planning: give every planned intermediate a view into a few reusable slabs.

Input: the nodes in execution order, each value's :class:`~seqjit.graph.ops.TensorSpec`, and for
each value its *root* (the value whose memory it lives in: itself for an ``"out"`` output, the
viewed/updated input's root for a view or in-place output). A root's lifetime runs from the node
that defines it to the last node reading it or any of its aliases (graph outputs live to the end).

Greedy assignment in execution order: a root takes the free slab that best fits it (or grows the
largest free slab, or opens a new one), and its slab is freed after its last reader has run, so a
node's outputs never share memory with its inputs. Slabs are allocated once, 64-byte aligned, and
each value gets a fixed ``np.ndarray`` view, which is what makes plan replay allocation-free.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqjit.kernels._aligned import ALIGN as _ALIGN
from seqjit.kernels._aligned import aligned_empty


@dataclass
class MemoryPlan:
    """``views``: root value -> array; ``slab_bytes``: slab sizes; ``value_bytes``: total bytes of
    the planned values if each had its own buffer (so ``sum(slab_bytes) <= value_bytes``)."""

    views: dict
    slab_of: dict
    slab_bytes: list
    value_bytes: int

    @property
    def planned_bytes(self) -> int:
        return sum(self.slab_bytes)

    def summary(self) -> str:
        return (f"{len(self.views)} planned values in {len(self.slab_bytes)} buffers: "
                f"{self.planned_bytes / 2**20:.2f} MiB (vs {self.value_bytes / 2**20:.2f} MiB without reuse)")


def _round(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def plan_buffers(order: list, specs: dict, planned: dict, last_use: dict) -> MemoryPlan:
    """``order``: list of (defined_roots, released_roots) per node; ``planned``: root -> True for
    roots the planner owns; ``last_use``: root -> index of its last reading node (``len(order)`` or
    more: lives to the end)."""
    slab_size: list = []
    free: list = []  # slab indices
    slab_of: dict = {}
    value_bytes = 0
    for defined, released in order:
        for root in defined:
            if not planned.get(root):
                continue
            spec = specs[root]
            need = _round(int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize)
            value_bytes += need
            fits = [s for s in free if slab_size[s] >= need]
            if fits:
                slab = min(fits, key=lambda s: slab_size[s])
            elif free:
                slab = max(free, key=lambda s: slab_size[s])
                slab_size[slab] = need
            else:
                slab = len(slab_size)
                slab_size.append(need)
                free.append(slab)
            free.remove(slab)
            slab_of[root] = slab
        for root in released:
            if root in slab_of:
                free.append(slab_of[root])
    slabs = [aligned_empty(n, np.uint8) for n in slab_size]
    views = {}
    for root, slab in slab_of.items():
        spec = specs[root]
        nbytes = int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
        views[root] = slabs[slab][:nbytes].view(spec.dtype).reshape(spec.shape)
    return MemoryPlan(views, slab_of, slab_size, value_bytes)
