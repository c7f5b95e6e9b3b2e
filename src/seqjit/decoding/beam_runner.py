"""Native beam search of a small batch with its set-up made once: a :class:`BeamRunner`.

The beam counterpart of :class:`~seqjit.decoding.greedy_runner.GreedyRunner`: for one batch shape
(sources, padded width, ``max_length``, beam width K) it holds the encoder program of the sources and
the step program of their ``sources x K`` rows, bound once. A decode copies the ids in, runs the
encoder, repeats each source's encoder outputs for its K beams and runs
:class:`~seqjit.decoding.native_beam.BeamSearch` to the end (no compaction: the batch is small).
The same programs and arithmetic as :func:`~seqjit.decoding.native_beam.native_beam`.
"""
from __future__ import annotations

import numpy as np

from .greedy_runner import GreedyRunner
from .native_beam import BeamSearch, _layout, _scratch


class BeamRunner(GreedyRunner):
    """A :class:`GreedyRunner` whose step program runs ``beams`` rows per source."""

    def __init__(self, model, batch: int, width: int, max_length: int, beams: int):
        self.beams = int(beams)
        super().__init__(model, batch, width, max_length)
        names = list(self.decoder)
        self.moving = tuple(self.bound[self.inputs.index(n)] for n in names)
        self.layout = _layout(self.time_axes, names, self.moving)
        self.scratch = _scratch(self.beams, self.moving)
        self.sources = np.arange(batch)
        self.search = None  # the BeamSearch buffers, made at the first decode, restarted at each
        self.nbytes += 4 * batch * self.beams * max_length * 8  # its token histories

    def decode(self, ids: np.ndarray, lengths: np.ndarray, options, banned: np.ndarray, prefix=None) -> list:
        """Beam-search results for ``ids`` [batch, width] (int64) with ``lengths``; ``banned`` the
        pool's (the model's) never-generated tokens, the same at every call; ``prefix``: each source's
        ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`), or None."""
        self.start(ids, lengths)
        if self.search is None:
            self.search = BeamSearch(self.eos, self.start_id, options, banned, ids.shape[0])
        else:
            self.search.restart(options)
        self.search.prefix = None if prefix is None else np.ascontiguousarray(prefix[:, :self.max_length])
        self.search.run(self.program, self.copy_back, self.logits, self.prev_bound, self.step_bound, self.moving,
                        self.layout, self.scratch, self.sources, 0)
        return self.search.results()

