"""Greedy decoding in one native call: the lowered step plan, the argmax under the banned tokens and
the token fed back all run in :func:`seqjit.graph._native_vm.greedy`, without Python per token.

Used by :func:`seqjit.decoding.generate` for plain greedy search (no sampling, repetition penalty,
n-gram ban, attention output or per-token callback; not under ``seqjit.profile()``, which times
every step's nodes) when the model's step plan is lowered to native
code; otherwise :func:`seqjit.decoding.greedy.greedy_search` runs. The tokens are those of
``greedy_search``; the scores (``return_scores``) are the same log-probabilities. Finished rows stay
in the batch (their tokens are ignored) instead of leaving it.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph import _native_vm, profiler
from seqjit.graph.lowering import Unsupported
from seqjit.kernels._threads import get_num_threads
from seqjit.models.base import LOGITS, NEXT, PREV_TOKENS, STEP, Seq2SeqModel

from .results import GenerationResult


def eligible(model, options, callback) -> bool:
    """Plain greedy search of a model whose step is the base class's (a model that overrides
    ``step`` decodes through it, in the Python loop)."""
    return (type(model).step is Seq2SeqModel.step and callback is None and not profiler.active()
            and options.beam_size == 1 and not options.sampling and options.repetition_penalty == 1.0
            and options.no_repeat_ngram_size == 0 and not options.return_attention)


def native_greedy(model, state, options, suppressed) -> list | None:
    """Decode every row of the fresh ``state``; None when the step plan has no native form."""
    batch, steps = state.batch, options.max_length
    prev = np.full(batch, model.decoder_start_id, np.int64)
    feeds = model.step_feeds(state, prev)
    plan = model.step_plan(state, "decoder_step", feeds)
    native = plan.native_replay(feeds)
    if native is None:
        return None
    arrays = native.bind(feeds)
    stepv = arrays[native.inputs.index(STEP)]
    prev = arrays[native.inputs.index(PREV_TOKENS)]
    logits = native.output(LOGITS)
    try:
        copy_back = native.copy_back_program([(NEXT + key, key) for key in state.decoder])
    except Unsupported:
        return None
    copy_back.set_inputs(arrays)
    ids = np.zeros((batch, steps), np.int64)
    lengths = np.zeros(batch, np.int64)
    scores = np.zeros(batch if options.return_scores else 0, np.float64)
    banned = np.array(sorted(set(int(t) for t in suppressed)), np.int64)
    _native_vm.greedy(native.program, copy_back, logits, prev, stepv, ids, lengths, scores, banned,
                      int(model.eos_id), int(options.min_length), 0, get_num_threads())
    state.step = int(stepv)
    results = []
    for b in range(batch):
        row = ids[b, :lengths[b]].tolist()
        if row and row[-1] == model.eos_id:
            row.pop()
        results.append(GenerationResult([row], [float(scores[b])] if options.return_scores else None, None))
    return results
