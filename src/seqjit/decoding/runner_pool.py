"""A model's idle decode runners (:class:`~seqjit.decoding.greedy_runner.GreedyRunner`,
:class:`~seqjit.decoding.beam_runner.BeamRunner`) kept by batch shape, so a repeated small ``generate``
reuses one instead of binding its programs again."""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from seqjit.graph.lowering import Unsupported
from seqjit.models.contract import declares

from .beam_runner import BeamRunner
from .greedy_runner import GreedyRunner
from .native_greedy import COMPACT_MIN_ROWS


def supports(request, native: str | None) -> str | None:
    """The runner path's declaration: why a pooled runner cannot decode ``request``, or None;
    ``native``: the native search's own declaration (a runner runs the same native programs)."""
    if native is not None:
        return native
    model, options, rows = request.model, request.options, request.rows
    if request.stream:
        return "a stream (one native step per call: the native stream)"
    if rows > request.max_batch_size:
        return f"{rows} sources in batches of {request.max_batch_size}: one native decode per batch"
    if rows * options.beam_size >= COMPACT_MIN_ROWS:
        return (f"{rows} x {options.beam_size} rows: one native decode per batch (at least {COMPACT_MIN_ROWS} "
                "rows: compacted, split over threads)")
    if not declares(model, "native_decode"):
        return "the model does not declare native_decode (start/step_feeds of its own)"
    if options.forces_tokens and options.beam_size == 1:
        return "a forced token (one Python step around the native loop)"
    return None

#: shapes a model keeps runners for (least recently used dropped first), idle runners per shape, and
#: the bytes the idle runners may hold in all (their plans' buffers and decoder state: a KV cache of
#: max_length steps); the most recent shape is always kept
MAX_SHAPES = 16
MAX_IDLE = 2
MAX_IDLE_BYTES = 256 << 20


class RunnerPool:
    """A model's idle runners by batch shape; :meth:`decode` takes one (or makes it), decodes and
    gives it back. A shape whose plans do not lower is remembered and never tried again."""

    def __init__(self):
        self._idle: OrderedDict = OrderedDict()   # key -> list of idle runners, or None: unsupported
        self._idle_bytes = 0
        self._lock = threading.Lock()

    def decode(self, model, ids, lengths, options, banned: np.ndarray, prefix=None) -> list | None:
        """Results of ``generate`` for a batch (the ``runner`` path of
        :func:`seqjit.decoding.strategy.choose`: fewer than ``COMPACT_MIN_ROWS`` rows, sources x beams)
        decoded greedily, by sampling or by beam search, ``banned`` (sorted int64) never generated;
        None when the model's plans have no native form (the caller decodes otherwise); ``prefix``:
        each row's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`), or None."""
        key = (ids.shape, options.max_length, options.beam_size, model.executor("encoder"),
               model.executor("decoder_step"))
        with self._lock:
            idle = self._idle.get(key, [])
            if idle is None:
                return None
            runner = idle.pop() if idle else None
            if runner is not None:
                self._idle_bytes -= runner.nbytes
        if runner is None:
            try:
                if options.beam_size > 1:
                    runner = BeamRunner(model, ids.shape[0], ids.shape[1], options.max_length, options.beam_size)
                else:
                    runner = GreedyRunner(model, ids.shape[0], ids.shape[1], options.max_length)
            except Unsupported:
                with self._lock:
                    self._idle[key] = None
                return None
        try:
            return runner.decode(ids, lengths, options, banned, prefix)
        finally:
            self._give_back(key, runner)

    def _give_back(self, key, runner) -> None:
        dropped = []
        with self._lock:
            idle = self._idle.setdefault(key, [])
            self._idle.move_to_end(key)
            if idle is not None and len(idle) < MAX_IDLE:
                idle.append(runner)
                self._idle_bytes += runner.nbytes
            else:
                dropped.append(runner)
            while len(self._idle) > 1 and (len(self._idle) > MAX_SHAPES or self._idle_bytes > MAX_IDLE_BYTES):
                _, old = self._idle.popitem(last=False)
                for r in old or ():
                    self._idle_bytes -= r.nbytes
                    dropped.append(r)
        for r in dropped:
            r.close()
