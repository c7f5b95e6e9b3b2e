"""Graph-to-graph rewrites run once per graph by :class:`~seqjit.graph.executor.Executor`.

Each pass takes a validated :class:`~seqjit.graph.ir.Graph` and returns a new one (the input graph
is left untouched) computing the same outputs:

- :func:`fold_constants`: evaluate nodes whose operands are all constants (position tables,
  weight transposes) and drop dead nodes and unused constants;
- :func:`fuse_linear_bias` / :func:`fuse_linear_activation`: ``linear`` followed by ``add`` of a
  constant bias and/or an activation becomes one ``linear`` node;
- :func:`merge_projections`: ``linear`` nodes reading the same input (Q/K/V of self-attention; the
  K/V projections of every decoder layer's cross-attention, which all read the encoder output) become
  one GEMM with concatenated weights followed by ``slice_last`` views;
- :func:`prefer_weight_layout` (``"in_out"`` or ``"out_in"``): store constant linear weights in the
  layout the linear kernel runs fastest on.
"""
from __future__ import annotations

from seqjit.graph.passes.constants import eliminate_dead_code, fold_constants, prefer_weight_layout
from seqjit.graph.passes.fusion import fuse_linear_activation, fuse_linear_bias
from seqjit.graph.passes.merge import merge_projections

DEFAULT_PASSES = (fold_constants, fuse_linear_bias, fuse_linear_activation, merge_projections, eliminate_dead_code)


def run_passes(graph, passes):
    """Apply ``passes`` in order; every result is validated."""
    from seqjit.graph.ops import OPS

    for rewrite in passes:
        graph = rewrite(graph).validate(OPS)
    return graph


__all__ = ["DEFAULT_PASSES", "run_passes", "fold_constants", "eliminate_dead_code", "prefer_weight_layout",
           "fuse_linear_bias", "fuse_linear_activation", "merge_projections"]
