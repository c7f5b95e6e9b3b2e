"""``generate`` and ``generate_stream``: one decoding entry point for every architecture.

Works with any model that follows the decoder-step contract of :mod:`seqjit.models.base`
(``start``/``step``/``DecoderState.reorder`` and the special token ids).
"""
from __future__ import annotations

import dataclasses
import itertools
import numbers
import os
import threading
from collections.abc import Mapping, Set

import numpy as np

from seqjit.kernels._threads import default_num_threads, get_num_threads, thread_cap
from seqjit.kernels.sampling import philox
from seqjit.models.base import Seq2SeqModel

from . import native_beam, native_greedy
from .beam import beam_search
from .greedy import greedy_search
from .greedy_runner import RunnerPool
from .limits import check_budget, check_max_length, checked_length, decode_bytes
from .native_stream import native_stream
from .options import SUPPRESSION_OPTIONS, DecodingOptions, document_options, unknown_options_message
from .results import GenerationResult, StepToken

__all__ = ["generate", "generate_stream", "DecodingOptions", "GenerationResult", "StepToken", "pad_sources"]


def pad_sources(sources, pad_id: int, lengths=None) -> tuple[np.ndarray, np.ndarray]:
    """``sources`` (a list of token-id sequences of any lengths, or a 2-D int array with optional
    ``lengths``) as a padded int64 ``[B, S]`` array and int64 ``[B]`` lengths."""
    if isinstance(sources, np.ndarray) and sources.ndim == 2:
        if sources.dtype.kind not in "iu":
            raise TypeError(f"sources must hold integer token ids, got dtype {sources.dtype}")
        if sources.shape[0] == 0:
            raise ValueError("sources is empty: give at least one source sequence")
        ids = np.ascontiguousarray(sources, dtype=np.int64)
        if lengths is None:
            return ids, np.full(ids.shape[0], ids.shape[1], np.int64)
        lengths = np.asarray(lengths)
        if lengths.shape != (ids.shape[0],) or lengths.dtype.kind not in "iu":
            raise ValueError(f"lengths must be an integer array of shape [{ids.shape[0]}], got {lengths.dtype} {list(lengths.shape)}")
        if lengths.size and (lengths.min() < 0 or lengths.max() > ids.shape[1]):
            raise ValueError(f"lengths must lie in [0, {ids.shape[1]}]")
        return ids, lengths.astype(np.int64)
    if lengths is not None:
        raise ValueError("lengths is only accepted with a padded 2-D array of sources")
    if isinstance(sources, (str, bytes, Mapping, Set)) or not hasattr(sources, "__len__"):
        raise TypeError(f"sources must be a list of token-id sequences, got {type(sources).__name__}")
    if _one_flat_source(sources):
        shown = str([int(i) for i in itertools.islice(sources, 8)])[:-1] + (", ...]" if len(sources) > 8 else "]")
        raise TypeError(f"sources must be a list of token-id sequences, got one flat sequence of ids; to decode one "
                        f"source, wrap it in a list: generate(model, [{shown}])")
    padded = _pad_flat(sources, pad_id)
    if padded is not None:
        return padded
    rows = []
    for i, src in enumerate(sources):
        try:
            arr = np.asarray(src)
        except ValueError:  # NumPy: "inhomogeneous shape"
            raise TypeError(f"sources[{i}] must be a flat sequence of integer token ids, got a ragged nested one") from None
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise TypeError(f"sources[{i}] must be a 1-D sequence of integer token ids, got {arr.dtype} {list(arr.shape)}")
        rows.append(arr.astype(np.int64))
    if not rows:
        raise ValueError("sources is empty: give at least one source sequence")
    width = max(1, max(r.shape[0] for r in rows))
    ids = np.full((len(rows), width), pad_id, np.int64)
    for i, r in enumerate(rows):
        ids[i, :r.shape[0]] = r
    return ids, np.array([r.shape[0] for r in rows], np.int64)


def _one_flat_source(sources) -> bool:
    """Whether ``sources`` is one source's ids (a flat list or 1-D array of integers) given alone."""
    if isinstance(sources, np.ndarray):
        return sources.ndim == 1 and sources.size > 0 and sources.dtype.kind in "iu"
    return len(sources) > 0 and all(isinstance(s, (numbers.Integral, np.integer)) and not isinstance(s, bool)
                                    for s in itertools.islice(sources, 64))


def _pad_flat(sources, pad_id: int):
    """:func:`pad_sources` of a list of flat integer sequences in a few whole-array steps; None for
    anything else (other types, nesting, an empty list), which the row-by-row checks then name."""
    try:
        one = len(sources) == 1
        lengths = None if one else np.fromiter(map(len, sources), np.int64, count=len(sources))
        flat = np.array(sources[0] if one else list(itertools.chain.from_iterable(sources)))
    except (TypeError, ValueError):
        return None
    if not len(sources) or flat.ndim != 1 or (flat.size and flat.dtype.kind not in "iu") \
            or (flat.dtype.kind == "u" and flat.size and flat.max() > np.iinfo(np.int64).max):
        return None
    if one:  # one row: no mask
        ids = np.full((1, max(1, flat.shape[0])), pad_id, np.int64)
        ids[0, :flat.shape[0]] = flat
        return ids, np.array([flat.shape[0]], np.int64)
    width = max(1, int(lengths.max()))
    ids = np.full((lengths.shape[0], width), pad_id, np.int64)
    ids[np.arange(width) < lengths[:, None]] = flat
    return ids, lengths


_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(DecodingOptions))


#: checked options by the keyword arguments that gave them (each value with its type: 1, 1.0 and
#: True are different arguments), so a repeated call skips the checks; cleared when it grows large
_checked: dict = {}
_MAX_CHECKED = 256


def _options(kwargs) -> DecodingOptions:
    try:
        key = tuple(sorted((k, type(v), v) for k, v in kwargs.items()))
        opts = _checked.get(key)
    except TypeError:  # an unhashable value: checked every time
        key = opts = None
    if opts is not None:
        return opts
    names = _OPTION_NAMES
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise TypeError(unknown_options_message(unknown, names))
    opts = DecodingOptions(**kwargs).validate()
    if key is not None:
        if len(_checked) >= _MAX_CHECKED:
            _checked.clear()
        _checked[key] = opts
    return opts


def resolve_rules(model, opts: DecodingOptions) -> DecodingOptions:
    """``opts`` with the model's decoding rules where the caller gave none (None): its config's
    ``forced_bos_id`` / ``forced_eos_id`` and suppression rules (``suppress_tokens``,
    ``begin_suppress_tokens``, ``bad_words_ids``, ``suppress_pad_token``); a token outside the target
    vocabulary is a ValueError naming the option."""
    config = getattr(model, "config", None)
    changes = {}
    for name in ("forced_bos_id", "forced_eos_id") + SUPPRESSION_OPTIONS:
        if getattr(opts, name) is None:
            own = getattr(config, name, None)
            if own is None and name in SUPPRESSION_OPTIONS:
                own = True if name == "suppress_pad_token" else ()
            if own is not None:
                changes[name] = tuple(tuple(w) for w in own) if name == "bad_words_ids" else \
                    tuple(own) if isinstance(own, (list, tuple)) else own
    if changes:
        opts = dataclasses.replace(opts, **changes)
    vocab = model.target_vocab_size
    if vocab is not None:
        for name in ("forced_bos_id", "forced_eos_id"):
            token = getattr(opts, name)
            if token is not None and token >= vocab:
                raise ValueError(f"{name} {token} is outside the target vocabulary [0, {vocab})")
        for name, tokens in (("suppress_tokens", opts.suppress_tokens), ("begin_suppress_tokens", opts.begin_suppress_tokens),
                             ("bad_words_ids", [t for w in opts.bad_words_ids for t in w])):
            outside = [t for t in tokens if t >= vocab]
            if outside:
                raise ValueError(f"{name} holds token id {outside[0]}, outside the target vocabulary [0, {vocab})")
    return opts


def _checked_max_length(model, opts: DecodingOptions, explicit: bool, rows: int, width: int) -> DecodingOptions:
    """:func:`check_max_length`: the checked options and the bytes the decode needs remembered per
    model for the options, ``explicit``, ``rows`` and source ``width``; the budget checked every
    call (the memory available changes)."""
    cache = model.__dict__.setdefault("_checked_max_length", {})
    key = (opts, explicit, rows, width)
    checked = cache.get(key)
    if checked is None:
        options = checked_length(model, opts, explicit=explicit)
        checked = (options, decode_bytes(model, options, rows, width))
        if len(cache) >= _MAX_CHECKED:
            cache.clear()
        cache[key] = checked
    check_budget(checked[1], rows, checked[0])
    return checked[0]


def _suppressed(model, opts: DecodingOptions) -> tuple:
    """Tokens never generated (the options resolved by :func:`resolve_rules`): ``suppress_tokens``,
    the one-token ``bad_words_ids`` (but the end token, as ``transformers``) and the padding token
    unless ``suppress_pad_token`` is False (or it is the end token)."""
    eos, pad = model.eos_id, model.pad_id
    banned = set(opts.suppress_tokens or ()) | {w[0] for w in opts.bad_words_ids or () if len(w) == 1 and w[0] != eos}
    if opts.suppress_pad_token is not False and pad is not None and pad != eos:
        banned.add(pad)
    return tuple(sorted(int(t) for t in banned))


def _check_vocab(model, ids, lengths):
    vocab = getattr(model, "source_vocab_size", None)
    if vocab is None:
        return
    if ids.size == 0 or (ids.min() >= 0 and ids.max() < vocab):  # padding included: all in range
        return
    outside = ((ids < 0) | (ids >= vocab)) & (np.arange(ids.shape[1]) < lengths[:, None])
    if outside.any():
        i = int(np.flatnonzero(outside.any(axis=1))[0])
        bad = int(ids[i][outside[i]][0])
        raise ValueError(f"sources[{i}] holds token id {bad}, outside the source vocabulary [0, {vocab})")


@document_options
def generate(model, sources, *, lengths=None, max_batch_size: int = 64, callback=None, **options) -> list:
    """Decode every source; returns one :class:`GenerationResult` per source, in order.

    Sources are decoded in batches of at most ``max_batch_size`` (longest first, to pad little);
    the results equal decoding each source alone. ``callback(StepToken)`` is called for every
    generated token (greedy and sampling only); returning True stops that source.
    """
    if getattr(model, "device", "cpu") != "cpu":  # on the GPU: decoded there (seqjit.gpu.generate)
        from seqjit.gpu.generate import generate as device_generate

        return device_generate(model, sources, lengths=lengths, max_batch_size=max_batch_size, callback=callback,
                               **options)
    opts = resolve_rules(model, _options(options))
    if not isinstance(max_batch_size, int) or max_batch_size < 1:
        raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
    if callback is not None and opts.beam_size > 1:
        raise ValueError("callback is only supported with beam_size=1 (greedy or sampling)")
    ids, lens = pad_sources(sources, model.pad_id, lengths)
    _check_vocab(model, ids, lens)
    opts = _with_seed(_checked_max_length(model, opts, "max_length" in options,
                                          min(max_batch_size, ids.shape[0]) * opts.beam_size, ids.shape[1]))
    if ids.shape[0] <= max_batch_size and callback is None:
        results = _runner_decode(model, ids, lens, opts)
        if results is not None:
            return results
    order = np.argsort(-lens, kind="stable")
    results: list = [None] * ids.shape[0]
    for start in range(0, order.shape[0], max_batch_size):
        chunk = order[start:start + max_batch_size]
        parts = _parts(model, chunk, lens, opts, callback)
        if len(parts) == 1:
            batch_results = _decode_rows(model, ids, lens, chunk, opts, callback)
        else:
            batch_results = _decode_parts(model, ids, lens, parts, opts, callback)
        for i, res in zip(chunk, batch_results):
            results[i] = _finished(res, opts, lens[i])
    return results


def _finished(res, opts, length) -> GenerationResult:
    """``res`` as ``generate`` returns it: scores only when asked for, the attention's source axis as
    long as the source (as when it is decoded alone)."""
    if not opts.return_scores:
        res.scores = None
    if res.attention is not None:
        res.attention = [a[..., :max(1, int(length))] for a in res.attention]
    return res


#: a batch decoded by native greedy or beam search is split over the intra-op threads in parts of at
#: least this many sources, each part decoded on its own thread with its own plans (no synchronisation
#: between them: a busy core slows its part only, where per-node threads would wait for it)
SPLIT_MIN_ROWS = 8
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


def _parts(model, rows: np.ndarray, lens: np.ndarray, opts, callback) -> list:
    """``rows`` (sorted by source length, longest first) cut into parts of about equal work (each
    row weighs its source length plus max_length: encoder and decoder steps); contiguous in length,
    so each part pads little."""
    threads = get_num_threads()
    count = min(threads, rows.shape[0] // SPLIT_MIN_ROWS)
    native = native_beam.eligible(model, opts) if opts.beam_size > 1 else native_greedy.eligible(model, opts, callback)
    if count < 2 or not native or getattr(model, "replay", None) == "python":
        return [rows]
    work = np.cumsum(lens[rows] + opts.max_length)
    cuts = np.searchsorted(work, work[-1] * np.arange(1, count) / count)
    cuts = np.clip(cuts, SPLIT_MIN_ROWS * np.arange(1, count), rows.shape[0] - SPLIT_MIN_ROWS * np.arange(count - 1, 0, -1))
    return np.split(rows, cuts)


_pools_lock = threading.Lock()


def _runner_decode(model, ids, lens, opts) -> list | None:
    """Greedy search, sampling or beam search of a batch of fewer than ``COMPACT_MIN_ROWS`` rows (sources x
    beams) through the model's :class:`~seqjit.decoding.greedy_runner.RunnerPool`; None where that does not
    apply."""
    native = native_beam.eligible(model, opts) if opts.beam_size > 1 else native_greedy.eligible(model, opts, None)
    if ids.shape[0] * opts.beam_size >= native_greedy.COMPACT_MIN_ROWS or not native \
            or (opts.forces_tokens and opts.beam_size == 1) or getattr(model, "replay", None) == "python" \
            or not _runs_base_decode(type(model)):
        return None
    pool = model.__dict__.get("_greedy_runners")
    if pool is None:
        with _pools_lock:
            pool = model.__dict__.setdefault("_greedy_runners", RunnerPool())
    results = pool.decode(model, ids, lens, opts, np.array(_suppressed(model, opts), np.int64))
    if results is not None and not opts.return_scores:
        for res in results:
            res.scores = None
    return results


def _runs_base_decode(cls) -> bool:
    """Whether ``cls`` starts and feeds its steps as the base class does (what a runner replays)."""
    return issubclass(cls, Seq2SeqModel) and all(
        getattr(cls, name) is getattr(Seq2SeqModel, name) for name in ("start", "start_from", "step_feeds", "step"))


#: a batch of at least ``COMPACT_MIN_ROWS`` rows is padded to a multiple of this many source
#: positions, so a file job's batches share a few plan shapes (a new shape costs a plan, its
#: lowering and the first touch of its buffers); padding is masked, so the results do not change
WIDTH_BUCKET = 4


def _decode_rows(model, ids, lens, rows, opts, callback) -> list:
    width = max(1, int(lens[rows].max()))
    src = ids[rows, :width]
    if rows.shape[0] >= native_greedy.COMPACT_MIN_ROWS and width % WIDTH_BUCKET:
        width += WIDTH_BUCKET - width % WIDTH_BUCKET
        pad = model.pad_id if model.pad_id is not None else 0
        src = np.concatenate([ids[rows, :width], np.full((rows.shape[0], max(0, width - ids.shape[1])), pad, np.int64)],
                             axis=1)
    state = model.start(src, lens[rows], max_length=opts.max_length)
    try:
        return _decode(model, state, opts, callback, rows)
    finally:
        state.close()


def _decode_parts(model, ids, lens, parts, opts, callback) -> list:
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
            return _decode_rows(model, ids, lens, rows, opts, callback)

    futures = [_pool.submit(run, rows) for rows in parts[1:]]
    first = run(parts[0])
    return first + [r for f in futures for r in f.result()]


def _decode(model, state, opts, callback, sources=None) -> list:
    """Results for every row of a fresh ``state`` (row r being source ``sources[r]`` of the caller's
    batch): native greedy search or sampling where it applies, else the loops. Sampling with a
    repetition penalty, an n-gram ban, attention output or a callback runs the Python loop
    (:func:`~seqjit.decoding.greedy.greedy_search`), which draws from the same stream."""
    if opts.beam_size > 1:
        if native_beam.eligible(model, opts) and getattr(model, "replay", None) != "python":
            results = native_beam.native_beam(model, state, opts, _suppressed(model, opts))
            if results is not None:
                return results
        return beam_search(model, state, opts, suppressed=_suppressed(model, opts))
    if native_greedy.eligible(model, opts, callback):
        results = native_greedy.native_greedy(model, state, opts, _suppressed(model, opts), sources)
        if results is not None:
            return results
    return _drain(greedy_search(model, state, opts, suppressed=_suppressed(model, opts), on_token=callback,
                                stream=callback is not None, need_scores=opts.return_scores or callback is not None,
                                sources=sources))


def _with_seed(opts: DecodingOptions) -> DecodingOptions:
    """Sampling without a seed: ``opts`` with a fresh one, drawn once for the whole call (every batch
    of it draws from the one stream)."""
    if opts.sampling and opts.seed is None:
        return dataclasses.replace(opts, seed=philox.fresh_seed())
    return opts


def _drain(gen):
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


@document_options
def generate_stream(model, source, **options):
    """Yield :class:`StepToken` for one source as each token is produced (greedy or sampling).

    Each step runs in one native call (:mod:`~seqjit.decoding.native_stream`) where native greedy
    search would; with a repetition penalty, an n-gram ban or ``return_attention``, or a step plan
    that does not lower, the Python loop streams (the same tokens: sampling draws from the stream of
    source row 0, as ``generate([source])``)."""
    opts = resolve_rules(model, _options(options))
    if opts.beam_size > 1:
        raise ValueError("generate_stream decodes greedily or by sampling: beam_size must be 1")
    ids, lens = pad_sources([source], model.pad_id)
    _check_vocab(model, ids, lens)
    opts = _with_seed(check_max_length(model, opts, explicit="max_length" in options, rows=1,
                                       source_length=ids.shape[1]))
    state = model.start(ids, lens, max_length=opts.max_length)
    try:
        tokens = None
        if getattr(model, "device", "cpu") == "cpu" and native_greedy.eligible(model, opts, None) \
                and not opts.forces_tokens:
            tokens = native_stream(model, state, opts, _suppressed(model, opts))
        if tokens is None:
            tokens = greedy_search(model, state, opts, suppressed=_suppressed(model, opts))
        yield from tokens
    finally:
        state.close()
