"""Beam search in native code: the lowered step plan, log-softmax with the score processors, the top-2K
of each source, the hypothesis bookkeeping and the decoder-state reorder all run in
:func:`seqjit.graph._native_vm.beam`, without Python per token.

The results are those of :func:`seqjit.decoding.beam.beam_search` (the reference: the same float32
arithmetic, ties and early-stopping rule). Used by :func:`seqjit.decoding.generate` when the model's
step is the base class's and its plan lowers, for beams of at most 128 and every option but
``return_attention``: :func:`seqjit.decoding.strategy.choose` decides, and says why not.

A source that can no longer improve is frozen in the native loop (its rows still run); once at most
half of a batch of at least ``COMPACT_MIN_ROWS`` rows is still improvable, the loop returns, the
batch is compacted (``DecoderState.reorder``) and decoding goes on with the plan for fewer rows.
Beams move among the rows of their source only, so the encoder state never moves within a batch.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph import _native_vm
from seqjit.kernels._threads import get_num_threads

from .beam import _NEG, _results
from .native_greedy import COMPACT_MIN_ROWS, bind_step, native_declines

#: the widest beam the native loop keeps (kernels/beam/_native.pxi: SJ_BEAM_MAXK)
MAX_BEAM = _native_vm.MAX_BEAM


def supports(request) -> str | None:
    """The native beam search's declaration: why it cannot decode ``request``, or None."""
    why = native_declines(request)
    if why is not None:
        return why
    options = request.options
    if options.prefixed and any(t in options.end_ids(request.model.eos_id) for p in options.target_prefix for t in p):
        return "a target_prefix holding an end token (the native beam search would end there)"
    if options.num_beam_groups > 1:
        return "group (diverse) beam search (num_beam_groups > 1: the Python beam loop)"
    if request.options.beam_size > MAX_BEAM:
        return f"beam_size above {MAX_BEAM}"
    vocab = getattr(request.model, "target_vocab_size", None)
    if vocab is not None and vocab < 2:
        return "a vocabulary of one token"
    return None


def _layout(time_axes: dict, names, arrays) -> np.ndarray:
    """For each state array: chunks per row, bytes per chunk, bytes per time step (0: no time axis)."""
    rows = []
    for name, arr in zip(names, arrays):
        axis = time_axes.get(name)
        if axis is None or not 1 <= axis < arr.ndim:
            rows.append((1, arr.strides[0], 0))
        else:
            chunks = int(np.prod(arr.shape[1:axis], dtype=np.int64))
            rows.append((chunks, arr.strides[axis - 1] if axis > 1 else arr.strides[0], arr.strides[axis]))
    return np.array(rows, np.int64).reshape(len(rows), 3)


def _scratch(K: int, arrays) -> np.ndarray:
    """Room for K rows of the widest state array, twice (the reorder gathers a source's moved rows
    there; the two halves of the sources each their own at 2 threads)."""
    return np.empty(2 * K * max([a.strides[0] for a in arrays] + [8]), np.uint8)


class BeamSearch:
    """One native beam search's buffers, by source: token histories (double-buffered), running and
    finished scores, lengths and flags; :meth:`run` advances the sources still in the batch."""

    def __init__(self, eos: int, start_id: int, options, suppressed, n_src: int, prefix=None):
        K, T = options.beam_size, options.max_length
        self.K, self.T, self.options = K, T, options
        self.eos, self.start_id = int(eos), int(start_id)
        self.banned = np.array(sorted(set(int(t) for t in suppressed)), np.int64)
        self.run_tokens = np.zeros((2, n_src, K, T), np.int64)
        self.fin_tokens = np.zeros((2, n_src, K, T), np.int64)
        self.run_scores = np.empty((n_src, K), np.float32)
        self.fin_len = np.empty((n_src, K), np.int64)
        self.fin_scores = np.empty((n_src, K), np.float32)
        self.fin_done = np.empty((n_src, K), np.int32)
        self.active = np.empty(n_src, np.int32)
        self.prefix = None if prefix is None else np.ascontiguousarray(prefix[:, :T])  # by source
        self.restart(options)

    def restart(self, options) -> None:
        """Start a new search of the same shape (sources, beam width, ``max_length``) with
        ``options``: every beam empty but the first of each source, no finished hypothesis. (Token
        histories are written at each position before any read of it.)"""
        self.options = options
        self.run_scores[:, 0], self.run_scores[:, 1:] = 0.0, _NEG
        self.fin_len.fill(0)
        self.fin_scores.fill(_NEG)
        self.fin_done.fill(0)
        self.active.fill(1)
        self.cur, self.t = 0, 0

    def run(self, program, copy_back, logits, prev, stepv, moving, layout, scratch, src, stop: int) -> bool:
        """Decode the sources ``src`` (the groups of K state rows, in order) from step ``self.t`` until
        the search is over (returns True) or at most ``stop`` of them can still improve."""
        every = src.shape[0] == self.active.shape[0]
        big = (self.run_tokens, self.fin_tokens)
        small = (self.run_scores, self.fin_len, self.fin_scores, self.fin_done, self.active)
        part = big if every else [np.ascontiguousarray(a[:, src]) for a in big]
        part_small = small if every else [np.ascontiguousarray(a[src]) for a in small]
        o = self.options
        self.t, self.cur, finished = _native_vm.beam(
            program, copy_back, logits, prev, stepv, moving, layout, part[0], part_small[0], part[1],
            part_small[1], part_small[2], part_small[3], part_small[4], self.banned, self.cur, self.t, self.T,
            self.eos, int(o.min_length), self.start_id, float(o.repetition_penalty), int(o.no_repeat_ngram_size),
            float(o.length_penalty), scratch, get_num_threads(), stop,
            -1 if o.forced_bos_id is None else int(o.forced_bos_id), -1 if o.forced_eos_id is None else int(o.forced_eos_id),
            None if self.prefix is None else (self.prefix if every else np.ascontiguousarray(self.prefix[src])))
        if not every:
            for whole, sub in zip(big + small, list(part) + list(part_small)):
                whole[(slice(None), src) if whole.ndim == 4 else src] = sub
        return finished

    def results(self) -> list:
        return _results(self.fin_tokens[self.cur], self.fin_len, self.fin_scores, None, self.eos,
                        self.options.num_hypotheses)


def native_beam(model, state, options, suppressed, prefix=None) -> list | None:
    """Decode every source row of the fresh ``state``; None when the step plan has no native form
    (nothing has run then: the caller decodes with the reference loop). ``prefix``: each source's
    ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`, holding no end token), or None."""
    n_src, K = state.batch, options.beam_size
    state.reorder(np.repeat(np.arange(n_src), K))
    search = BeamSearch(model.eos_id, model.decoder_start_id, options, suppressed, n_src, prefix)
    src = np.arange(n_src)                      # the source of each group of K state rows
    prev = np.full(n_src * K, model.decoder_start_id, np.int64)
    while True:
        bound = bind_step(model, state, prev)
        if bound is None:
            if search.t:
                raise RuntimeError("the step plan of a compacted batch did not lower")  # not reached
            return None
        names = list(state.decoder)
        moving = tuple(bound.inputs[n] for n in names)
        rows = src.shape[0]
        stop = rows // 2 if rows * K >= COMPACT_MIN_ROWS else 0
        prev_bound = bound.prev
        finished = search.run(bound.program, bound.copy_back, bound.logits, prev_bound, bound.step, moving,
                              _layout(state.time_axes, names, moving), _scratch(K, moving), src, stop)
        state.step = search.t
        if finished:
            break
        keep = np.flatnonzero(search.active[src])
        state.reorder((keep[:, None] * K + np.arange(K)).reshape(-1))
        prev = np.ascontiguousarray(prev_bound.reshape(rows, K)[keep].reshape(-1))
        src = src[keep]
    return search.results()
