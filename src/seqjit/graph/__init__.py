"""The graph IR (:mod:`.ir`), op definitions (:mod:`.ops`), passes (:mod:`.passes`), the executor
(:mod:`.executor`, buffer planning in :mod:`.memory`) and the profiler (:mod:`.profiler`)."""
from __future__ import annotations

from seqjit.graph.executor import Executor, Plan
from seqjit.graph.ir import Graph, GraphBuilder, InputSpec, Node
from seqjit.graph.profiler import Profile, profile

__all__ = ["Graph", "GraphBuilder", "InputSpec", "Node", "Executor", "Plan", "Profile", "profile"]
