"""Greedy decoding and sampling in one native call: the lowered step plan, the argmax (or the draw)
under the banned tokens and the token fed back all run in :func:`seqjit.graph._native_vm.greedy`
(:func:`~seqjit.graph._native_vm.sample` when sampling), without Python per token.

Used by :func:`seqjit.decoding.generate` for greedy search and for sampling (temperature, top-k,
top-p, with ``min_length`` and the suppressed tokens) without a repetition penalty, n-gram ban,
attention output or per-token callback (those run in the Python loop), not under
``seqjit.profile()`` (which times every step's nodes), when the model's step plan is lowered to
native code (:func:`seqjit.decoding.strategy.choose` decides); otherwise
:func:`seqjit.decoding.greedy.greedy_search` runs. The tokens are those of
``greedy_search`` (sampling: drawn from the same Philox stream of (seed, source row, step), so a
seeded run gives the same ids); the scores (``return_scores``) are the same log-probabilities. Finished rows stay
in the native loop's batch (their tokens ignored) until at most half of a batch of 16 or more rows
is still running; then the batch is compacted (``DecoderState.reorder``) and decoding goes on with
the plan for the smaller batch.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from seqjit.graph import _native_vm, profiler
from seqjit.graph.lowering import Unsupported
from seqjit.kernels._threads import get_num_threads
from seqjit.kernels.sampling import philox
from seqjit.models.contract import LOGITS, NEXT, PREV_TOKENS, STEP, declares

from . import prefix as prefixes
from .results import GenerationResult


#: a batch of at least this many rows is compacted (finished rows removed, the rest decoded on a
#: plan for the smaller batch) once at most half of its rows are still running
COMPACT_MIN_ROWS = 16


def native_declines(request) -> str | None:
    """Why no native program (the native decode, the runner, the native stream) can run
    ``request``, in words; None when one can. What every native search shares: the model's own step
    plan, lowered, with no per-token Python."""
    model, options = request.model, request.options
    device = getattr(model, "device", "cpu")
    if device != "cpu":
        return f"the model is on {device!r} (the device loops or the Python loops on the device model)"
    if not declares(model, "native_step"):
        return "the model does not declare native_step (it overrides step): the loop calls its step"
    if getattr(model, "replay", None) == "python":
        return "the model's replay is 'python' (the reference replay)"
    if profiler.active():
        return "seqjit.profile() is active (it times every step's nodes)"
    if request.callback is not None:
        return "a per-token callback"
    if options.return_attention:
        return "return_attention"
    if options.step_rules:
        return "a step-dependent suppression rule"
    if options.end_ids(model.eos_id) != (model.eos_id,):
        return "an end_token other than the model's"
    if options.return_end_token:
        return "return_end_token"
    return None


def supports(request) -> str | None:
    """The native greedy / sampling decode's declaration: why it cannot decode ``request`` (beam
    search: :func:`seqjit.decoding.native_beam.supports`), or None."""
    why = native_declines(request)
    if why is not None:
        return why
    options = request.options
    if options.repetition_penalty != 1.0:
        return "a repetition penalty"
    if options.no_repeat_ngram_size:
        return "an n-gram ban"
    if request.stream and options.forced_bos_id is not None and options.forced_bos_id == int(request.model.eos_id):
        return "a forced first token that is the end token (the native stream's forced tokens never end it)"
    if options.prefixed and options.forced_bos_id is not None and not request.stream:
        return "a target_prefix with a forced first token"
    return None


class BoundStep(NamedTuple):
    """The native step program of a decode's batch bound to its feeds: the program, the one writing
    the recurrent state back, the logits it writes, the previous-token and step inputs it reads, and
    every input by name (the state arrays among them)."""

    program: object
    copy_back: object
    logits: np.ndarray
    prev: np.ndarray
    step: np.ndarray
    inputs: dict


def bind_step(model, state, prev: np.ndarray) -> BoundStep | None:
    """:class:`BoundStep` of ``state``'s batch with previous tokens ``prev`` (int64 [B]); None when
    its plan has no native form or its state cannot be written back natively."""
    feeds = model.step_feeds(state, prev)
    native = model.step_plan(state, "decoder_step", feeds).native_replay(feeds)
    if native is None:
        return None
    arrays = native.bind(feeds)
    try:
        copy_back = native.copy_back_program([(NEXT + key, key) for key in state.decoder])
    except Unsupported:
        return None
    copy_back.set_inputs(arrays)
    inputs = dict(zip(native.inputs, arrays))
    return BoundStep(native.program, copy_back, native.output(LOGITS), inputs[PREV_TOKENS], inputs[STEP], inputs)


def native_greedy(model, state, options, suppressed, sources=None, prefix=None) -> list | None:
    """Decode every row of the fresh ``state``; None when the step plan has no native form.
    ``sources``: each row's index in the caller's batch (what sampling draws are keyed by; default
    the row itself); ``prefix``: each row's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`,
    or None), forced by the native loop (``forced``)."""
    forced_eos = options.forced_eos_id
    batch, steps = state.batch, options.max_length - (forced_eos is not None)  # the tokens the native loop picks
    if options.sampling:
        seed = philox.fresh_seed() if options.seed is None else philox.check_seed(options.seed)
        sources = np.arange(batch, dtype=np.int64) if sources is None else np.asarray(sources, np.int64)
        if sources.shape != (batch,):
            raise ValueError(f"sources must have one index per row ({batch}), got shape {list(sources.shape)}")
    eos = int(model.eos_id)
    banned = np.array(sorted(set(int(t) for t in suppressed)), np.int64)
    ids = np.zeros((batch, steps), np.int64)        # by source row
    lengths = np.zeros(batch, np.int64)
    scores = np.zeros(batch if options.return_scores else 0, np.float64)
    rows = np.arange(batch)                          # the source row of each state row
    prev = np.full(batch, model.decoder_start_id, np.int64)
    forced = None if prefix is None else np.ascontiguousarray(prefix[:, :steps])  # the loop's steps only
    if options.forced_bos_id is not None and steps:  # the rule's first token (log-probability 0): one Python step
        feeds = model.step_feeds(state, prev)
        if model.step_plan(state, "decoder_step", feeds).native_replay(feeds) is None:
            return None  # before the step: the Python loop then decodes from a fresh state
        model.step(state, prev, copy=False)
        prev = np.full(batch, options.forced_bos_id, np.int64)
        ids[:, 0] = prev
        if options.forced_bos_id == eos or steps == 1:
            lengths[:] = 1
            return _results(ids, lengths, scores, options, eos, prefix)
    while steps:
        bound = bind_step(model, state, prev)
        if bound is None:
            if state.step:
                raise RuntimeError("the step plan of a compacted batch did not lower")  # not reached
            return None
        n = rows.shape[0]
        part_ids = np.ascontiguousarray(ids[rows])
        part_lengths = np.zeros(n, np.int64)
        part_scores = np.ascontiguousarray(scores[rows]) if options.return_scores else scores
        stop = n // 2 if n >= COMPACT_MIN_ROWS else 0
        args = (bound.program, bound.copy_back, bound.logits, bound.prev, bound.step, part_ids, part_lengths,
                part_scores, banned, eos, int(options.min_length), state.step, get_num_threads(), stop)
        part_forced = None if forced is None or not forced.size else np.ascontiguousarray(forced[rows])
        if options.sampling:
            state.step = int(_native_vm.sample(*args, np.ascontiguousarray(sources[rows]), seed,
                                               *sampling_args(options), part_forced))
        else:
            state.step = int(_native_vm.greedy(*args, part_forced))
        ids[rows] = part_ids
        if options.return_scores:
            scores[rows] = part_scores
        running = part_lengths == 0
        lengths[rows[~running]] = part_lengths[~running]
        if not running.any() or state.step >= steps:
            break
        keep = np.flatnonzero(running)
        state.reorder(keep)
        rows = rows[keep]
        prev = part_ids[keep, state.step - 1].copy()
    return _results(ids, lengths, scores, options, eos, prefix)


def _results(ids, lengths, scores, options, eos: int, prefix=None) -> list:
    """The results, with ``options.forced_eos_id`` appended to every row the loop stopped at its width
    (``ids.shape[1]`` = max_length - 1) without an end token of its own (an end token of its
    ``target_prefix`` does not end it; a prefix as long as max_length gives its last token instead)."""
    batch, width = ids.shape
    plen = None if prefix is None else prefixes.lengths(prefix, batch)
    if options.forced_eos_id is not None:
        cut = np.ones(batch, bool) if width == 0 else (lengths == width) & (ids[:, width - 1] != eos)
        if plen is not None and width:  # an end token of the prefix does not end the row
            cut |= (lengths == width) & (plen >= width)
        ids = np.concatenate([ids, np.zeros((batch, 1), np.int64)], axis=1)
        ids[cut, width] = options.forced_eos_id
        if prefix is not None and prefix.shape[1] > width:
            whole = cut & (plen > width)
            ids[whole, width] = prefix[whole, width]
        lengths = np.where(cut, width + 1, lengths)
    return greedy_results(ids, lengths, scores if options.return_scores else None, eos, plen)


def sampling_args(options) -> tuple:
    """(temperature, top-k, top-p) as :func:`seqjit.graph._native_vm.sample` takes them."""
    return float(options.sampling_temperature), int(options.sampling_topk), float(options.sampling_topp)


def greedy_results(ids: np.ndarray, lengths: np.ndarray, scores, eos: int, plen=None) -> list:
    """One GenerationResult per row of ``ids`` [B, T]: its first ``lengths[b]`` tokens, the end
    token dropped (not one of its ``target_prefix``, ``plen[b]`` tokens); ``scores`` [B] or None."""
    rows, counts = ids.tolist(), lengths.tolist()
    sums = scores.tolist() if scores is not None else None
    kept = None if plen is None else plen.tolist()
    results = []
    for b, (row, n) in enumerate(zip(rows, counts)):
        del row[n:]
        if len(row) > (0 if kept is None else kept[b]) and row[-1] == eos:
            row.pop()
        results.append(GenerationResult([row], [sums[b]] if sums is not None else None, None))
    return results
