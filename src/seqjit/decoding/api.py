"""``generate`` and ``generate_stream``: one decoding entry point for every architecture.

Works with any model that follows the decoder-step contract of :mod:`seqjit.models.base`
(``start``/``step``/``DecoderState.reorder`` and the special token ids). The inputs are checked once
per call (:mod:`~seqjit.decoding.inputs`), then :func:`seqjit.decoding.strategy.choose` decides the
path (device, pooled runner, native decode, Python loop) and this module runs it.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from seqjit.kernels._threads import default_num_threads, get_num_threads, thread_cap

from . import native_beam, native_greedy
from .alternatives import decode_alternatives
from .group_beam import python_beam_search
from .greedy import greedy_search
from .runner_pool import RunnerPool
from .batch import SourceBatch
from .inputs import check_batching, drain, finished, given_options, pad_sources, parse_options, resolve_rules
from .strategy import COMPACT_MIN_ROWS, NATIVE, RUNNER, Choice, choose
from .native_stream import native_stream
from .prefix import checked_prefix
from .options import DecodingOptions, with_options
from .spec import decode_spec
from .results import GenerationResult, StepToken

__all__ = ["generate", "generate_stream", "DecodingOptions", "GenerationResult", "StepToken", "pad_sources"]


@with_options
def generate(model, sources, *, lengths=None, max_batch_size: int = 64, callback=None, **options) -> list:
    """Decode every source; returns one :class:`GenerationResult` per source, in order.

    Sources are decoded in batches of at most ``max_batch_size`` (longest first, to pad little);
    the results equal decoding each source alone. ``callback(StepToken)`` is called for every
    generated token (greedy and sampling only); returning True stops that source. ``lengths``: each
    row's length when ``sources`` is a padded 2-D array. Any other keyword (a Hugging Face name such
    as ``num_beams``, a misspelling) is an :class:`~seqjit.errors.UnknownOptionError` naming the
    option it probably means.
    """
    return decode(model, sources, lengths, max_batch_size, callback, options)


def decode(model, sources, lengths, max_batch_size, callback, options: dict) -> list:
    """:func:`generate` (also :meth:`Seq2SeqModel.generate <seqjit.models.base.Seq2SeqModel.generate>`)
    with the decoding ``options`` given by keyword (any other name is refused by name)."""
    options = given_options(options)
    if getattr(model, "device", "cpu") != "cpu":  # on a device: decoded by its runtime (seqjit.gpu.generate)
        return model.device_runtime.generate(model, sources, lengths=lengths, max_batch_size=max_batch_size,
                                             callback=callback, **options)
    opts = resolve_rules(model, parse_options(options))
    check_batching(max_batch_size, callback, opts)
    batch = SourceBatch.of(model, sources, lengths).limited(opts)
    spec = decode_spec(model, opts, explicit="max_length" in options,
                       rows=min(max_batch_size, len(batch)) * opts.beam_size, width=batch.ids.shape[1])
    spec = checked_prefix(model, spec, len(batch))
    batch = batch.with_prefix(spec)
    if spec.return_alternatives:
        if callback is not None:
            raise ValueError("callback cannot be combined with return_alternatives")
        results = decode_alternatives(model, batch, spec, options, max_batch_size,
                                      lambda ids, lens, opts: decode(model, ids, lens, max_batch_size, None, opts))
        return _marked([finished(r, spec, n) for r, n in zip(results, batch.lengths)], batch)
    choice = choose(model, spec, rows=len(batch), max_batch_size=max_batch_size, callback=callback)
    if choice.path == RUNNER:
        results = _runner_decode(model, batch, spec)
        if results is not None:
            return _marked(results, batch)
        choice = choice._replace(path=NATIVE, why="the runner's plans do not lower")
    results: list = [None] * len(batch)
    for part in batch.batches(max_batch_size):
        parts = _parts(model, choice, part, spec)
        if len(parts) == 1:
            batch_results = _decode_rows(model, part, spec, callback, choice)
        else:
            batch_results = _decode_parts(model, parts, spec, callback, choice)
        for i, length, res in zip(part.index.tolist(), part.lengths, batch_results):
            results[i] = finished(res, spec, length)
    return _marked(results, batch)


def _marked(results: list, batch: SourceBatch) -> list:
    """``results`` (in the caller's order) with each truncated source's result saying so."""
    if batch.truncated is not None:
        for i in np.flatnonzero(batch.truncated).tolist():
            results[int(batch.index[i])].truncated = True
    return results


#: a batch decoded by native greedy or beam search is split over the intra-op threads in parts of at
#: least this many sources, each part decoded on its own thread with its own plans (no synchronisation
#: between them: a busy core slows its part only, where per-node threads would wait for it)
SPLIT_MIN_ROWS = 8
#: a float32 model of at least this many weight bytes reads its weights from memory every decoder
#: step; it is split only into parts of at least SPLIT_MIN_STEP_ROWS step rows (sources x beams):
#: two parts each read every weight every step, where one part whose products the team of two
#: splits by columns reads it once, so at few rows (memory-bound) one part is faster; an int8
#: model's products of more than 4 rows do not take the team, so it keeps SPLIT_MIN_ROWS
#: (measurements: benchmarks/RESULTS.md, "Figures moved out of docstrings")
STREAMED_WEIGHT_BYTES = 16 << 20
SPLIT_MIN_STEP_ROWS = 32
_pool = None
_pool_lock = threading.Lock()


def _forget_pool_after_fork() -> None:
    """In a child made by ``fork``: the parent's pool threads do not exist there (a task submitted
    to its pool would wait forever) and a lock may have been held at the fork; start afresh, lazily."""
    global _pool, _pool_lock, _pools_lock
    _pool = None
    _pool_lock = threading.Lock()
    _pools_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _parts(model, choice: Choice, batch: SourceBatch, opts) -> list:
    """``batch`` (sorted by source length, longest first) cut into parts of about equal work (each
    row weighs its source length plus max_length: encoder and decoder steps); contiguous in length,
    so each part pads little. Only a native decode is split (:func:`_least_part` rows a part at least)."""
    threads = get_num_threads()
    least = _least_part(model, opts)
    count = min(threads, len(batch) // least)
    if count < 2 or choice.path != NATIVE:
        return [batch]
    work = np.cumsum(batch.lengths + opts.max_length)
    cuts = np.searchsorted(work, work[-1] * np.arange(1, count) / count)
    cuts = np.clip(cuts, least * np.arange(1, count), len(batch) - least * np.arange(count - 1, 0, -1))
    return [batch.take(rows) for rows in np.split(np.arange(len(batch)), cuts)]


def _least_part(model, opts) -> int:
    """The fewest sources a part of a split batch has: SPLIT_MIN_ROWS, or for a float32 model of
    STREAMED_WEIGHT_BYTES or more, enough for SPLIT_MIN_STEP_ROWS step rows."""
    streamed = model.__dict__.get("_split_streamed")
    if streamed is None:  # weighed once per model
        weights = getattr(model, "weights", None) or {}
        big = sum(int(getattr(a, "nbytes", 0)) for a in weights.values()) >= STREAMED_WEIGHT_BYTES
        int8 = any(getattr(a, "dtype", None) == np.int8 for a in weights.values())
        streamed = model.__dict__.setdefault("_split_streamed", big and not int8)
    if not streamed:
        return SPLIT_MIN_ROWS
    return max(SPLIT_MIN_ROWS, -(-SPLIT_MIN_STEP_ROWS // opts.beam_size))


_pools_lock = threading.Lock()


def _runner_decode(model, batch: SourceBatch, opts) -> list | None:
    """The ``runner`` path (:func:`~seqjit.decoding.strategy.choose`): the whole batch through the
    model's :class:`~seqjit.decoding.runner_pool.RunnerPool`; None when its plans do not lower."""
    pool = model.__dict__.get("_greedy_runners")
    if pool is None:
        with _pools_lock:
            pool = model.__dict__.setdefault("_greedy_runners", RunnerPool())
    results = pool.decode(model, batch.ids, batch.lengths, opts, opts.banned, batch.prefix)
    if results is not None and not opts.return_scores:
        for res in results:
            res.scores = None
    return results


#: a batch of at least ``COMPACT_MIN_ROWS`` rows is padded to a multiple of this many source
#: positions, so a file job's batches share a few plan shapes (a new shape costs a plan, its
#: lowering and the first touch of its buffers); padding is masked, so the results do not change
WIDTH_BUCKET = 4


def _decode_rows(model, batch: SourceBatch, opts, callback, choice: Choice) -> list:
    src = batch.padded_to(WIDTH_BUCKET, model.source_pad_id) if len(batch) >= COMPACT_MIN_ROWS else batch.ids
    state = model.start_checked(src, batch.lengths, max_length=opts.max_length)
    try:
        return _decode(model, state, opts, callback, choice, batch.index, batch.prefix)
    finally:
        state.close()


def _decode_parts(model, parts, opts, callback, choice: Choice) -> list:
    """Each part on its own thread (the calling thread takes the first), one intra-op thread each;
    the native decode releases the GIL, so the parts run in parallel."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(max_workers=max(1, default_num_threads() - 1),
                                       thread_name_prefix="seqjit-decode")

    def run(rows):
        with thread_cap(1):
            return _decode_rows(model, rows, opts, callback, choice)

    futures = [_pool.submit(run, rows) for rows in parts[1:]]
    first = run(parts[0])
    return first + [r for f in futures for r in f.result()]


def _decode(model, state, opts, callback, choice: Choice, sources=None, prefix=None) -> list:
    """Results for every row of a fresh ``state`` (row r being source ``sources[r]`` of the caller's
    batch, with ``target_prefix`` ``prefix[r]``: :func:`seqjit.decoding.prefix.prefix_rows`) on
    ``choice``'s path: the native decode (greedy, sampling or beam search in one call), or
    the Python loops (:func:`~seqjit.decoding.greedy.greedy_search`, which draws from the same
    stream, and :func:`~seqjit.decoding.beam.beam_search`), also where the step plan does not lower."""
    suppressed = opts.suppressed
    if choice.path == NATIVE:
        if opts.beam_size > 1:
            results = native_beam.native_beam(model, state, opts, suppressed, prefix)
        else:
            results = native_greedy.native_greedy(model, state, opts, suppressed, sources, prefix)
        if results is not None:
            return results
    if opts.beam_size > 1:
        return python_beam_search(model, state, opts, suppressed=suppressed, prefix=prefix)
    return drain(greedy_search(model, state, opts, suppressed=suppressed, on_token=callback,
                                stream=callback is not None, need_scores=opts.return_scores or callback is not None,
                                sources=sources, prefix=prefix))


@with_options
def generate_stream(model, source, **options):
    """Yield :class:`StepToken` for one source as each token is produced (greedy or sampling).

    Each step runs in one native call (:mod:`~seqjit.decoding.native_stream`) where native greedy
    search would (a ``target_prefix`` and forced tokens included: their tokens are yielded too, so the
    streamed ids are ``generate``'s); with a repetition penalty, an n-gram ban or ``return_attention``,
    or a step plan that does not lower, the Python loop streams (the same tokens: sampling draws from the stream of
    source row 0, as ``generate([source])``). Other keywords: as :func:`generate`."""
    options = given_options(options)
    opts = resolve_rules(model, parse_options(options))
    if opts.beam_size > 1:
        raise ValueError("generate_stream decodes greedily or by sampling: beam_size must be 1")
    if opts.return_alternatives:
        raise ValueError("generate_stream yields one hypothesis: return_alternatives must be False")
    batch = SourceBatch.of(model, [source]).limited(opts)
    opts = decode_spec(model, opts, explicit="max_length" in options, rows=1, width=batch.ids.shape[1])
    opts = checked_prefix(model, opts, 1)
    batch = batch.with_prefix(opts)
    state = model.start_checked(batch.ids, batch.lengths, max_length=opts.max_length)
    try:
        tokens = None
        if choose(model, opts, rows=1, max_batch_size=1, stream=True).path == NATIVE:
            tokens = native_stream(model, state, opts, opts.suppressed, batch.prefix)
        if tokens is None:
            tokens = greedy_search(model, state, opts, suppressed=opts.suppressed, prefix=batch.prefix)
        yield from tokens
    finally:
        state.close()
