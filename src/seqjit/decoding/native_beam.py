"""Beam search in native code: the lowered step plan, log-softmax with the score processors, the top-2K
of each source, the hypothesis bookkeeping and the decoder-state reorder all run in
:func:`seqjit.graph._native_vm.beam`, without Python per token.

The results are those of :func:`seqjit.decoding.beam.beam_search` (the reference: the same float32
arithmetic, ties and early-stopping rule). Used by :func:`seqjit.decoding.generate` when the model's
step is the base class's and its plan lowers, for beams of at most 128 and every option but
``return_attention`` (which runs the reference loop; not under ``seqjit.profile()`` either).

A source that can no longer improve is frozen in the native loop (its rows still run); once at most
half of a batch of at least ``COMPACT_MIN_ROWS`` rows is still improvable, the loop returns, the
batch is compacted (``DecoderState.reorder``) and decoding goes on with the plan for fewer rows.
Beams move among the rows of their source only, so the encoder state never moves within a batch.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph import _native_vm, profiler
from seqjit.graph.lowering import Unsupported
from seqjit.kernels._threads import get_num_threads
from seqjit.models.base import LOGITS, NEXT, PREV_TOKENS, STEP, Seq2SeqModel

from .beam import _NEG, _results
from .native_greedy import COMPACT_MIN_ROWS

#: the widest beam the native loop keeps (kernels/beam/_native.pxi: SJ_BEAM_MAXK)
MAX_BEAM = 128


def eligible(model, options) -> bool:
    """Beam search of a model whose step is the base class's, without attention output."""
    return (type(model).step is Seq2SeqModel.step and not profiler.active() and 1 < options.beam_size <= MAX_BEAM
            and not options.return_attention)


def _layout(state, names, arrays) -> np.ndarray:
    """For each state array: chunks per row, bytes per chunk, bytes per time step (0: no time axis)."""
    rows = []
    for name, arr in zip(names, arrays):
        axis = state.time_axes.get(name)
        if axis is None or not 1 <= axis < arr.ndim:
            rows.append((1, arr.strides[0], 0))
        else:
            chunks = int(np.prod(arr.shape[1:axis], dtype=np.int64))
            rows.append((chunks, arr.strides[axis - 1] if axis > 1 else arr.strides[0], arr.strides[axis]))
    return np.array(rows, np.int64).reshape(len(rows), 3)


def native_beam(model, state, options, suppressed) -> list | None:
    """Decode every source row of the fresh ``state``; None when the step plan has no native form
    (nothing has run then: the caller decodes with the reference loop)."""
    n_src, K, T = state.batch, options.beam_size, options.max_length
    vocab = model.target_vocab_size
    if vocab is not None and 2 * K > K * vocab:
        return None
    state.reorder(np.repeat(np.arange(n_src), K))
    banned = np.array(sorted(set(int(t) for t in suppressed)), np.int64)
    run_tokens = np.zeros((2, n_src, K, T), np.int64)
    fin_tokens = np.zeros((2, n_src, K, T), np.int64)
    run_scores = np.tile(np.array([0.0] + [_NEG] * (K - 1), np.float32), (n_src, 1))
    fin_len = np.zeros((n_src, K), np.int64)
    fin_scores = np.full((n_src, K), _NEG, np.float32)
    fin_done = np.zeros((n_src, K), np.int32)
    active = np.ones(n_src, np.int32)
    src = np.arange(n_src)                      # the source of each group of K state rows
    out = [fin_tokens, fin_len, fin_scores]     # by source, filled as sources leave or finish
    prev = np.full(n_src * K, model.decoder_start_id, np.int64)
    cur, t = 0, 0
    while True:
        feeds = model.step_feeds(state, prev)
        plan = model.step_plan(state, "decoder_step", feeds)
        native = plan.native_replay(feeds)
        if native is None:
            if t:
                raise RuntimeError("the step plan of a compacted batch did not lower")  # not reached
            return None
        arrays = native.bind(feeds)
        try:
            copy_back = native.copy_back_program([(NEXT + key, key) for key in state.decoder])
        except Unsupported:
            return None
        copy_back.set_inputs(arrays)
        names = list(state.decoder)
        moving = tuple(arrays[native.inputs.index(n)] for n in names)
        layout = _layout(state, names, moving)
        scratch = np.empty(K * max([a.strides[0] for a in moving] + [8]), np.uint8)
        rows = src.shape[0]
        part = [np.ascontiguousarray(a[:, src] if a.ndim == 4 else a[src])
                for a in (run_tokens, fin_tokens)] if rows != n_src else [run_tokens, fin_tokens]
        small = [np.ascontiguousarray(a[src]) for a in (run_scores, fin_len, fin_scores, fin_done, active)] \
            if rows != n_src else [run_scores, fin_len, fin_scores, fin_done, active]
        stop = rows // 2 if rows * K >= COMPACT_MIN_ROWS else 0
        t, cur, finished = _native_vm.beam(
            native.program, copy_back, native.output(LOGITS), arrays[native.inputs.index(PREV_TOKENS)],
            arrays[native.inputs.index(STEP)], moving, layout, part[0], small[0], part[1], small[1], small[2],
            small[3], small[4], banned, cur, t, T, int(model.eos_id), int(options.min_length),
            int(model.decoder_start_id), float(options.repetition_penalty), int(options.no_repeat_ngram_size),
            float(options.length_penalty), scratch, get_num_threads(), stop)
        if rows != n_src:
            run_tokens[:, src], fin_tokens[:, src] = part
            run_scores[src], fin_len[src], fin_scores[src], fin_done[src], active[src] = small
        state.step = t
        if finished:
            break
        keep = np.flatnonzero(active[src])
        state.reorder((keep[:, None] * K + np.arange(K)).reshape(-1))
        prev = np.ascontiguousarray(arrays[native.inputs.index(PREV_TOKENS)].reshape(rows, K)[keep].reshape(-1))
        src = src[keep]
    return _results(out[0][cur], out[1], out[2], None, int(model.eos_id), options.num_hypotheses)
