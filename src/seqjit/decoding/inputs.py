"""The public inputs of a decode, shared by every decoding path (CPU loops, native replay, the GPU):
sources padded into one id array, the options checked once, the model's forced-token rules, the
source ids checked against the vocabulary, the tokens never generated, the sampling seed, and the
result as ``generate`` returns it.
"""
from __future__ import annotations

import dataclasses
import itertools
import numbers
from collections.abc import Mapping, Set

import numpy as np

from seqjit.errors import NothingGenerable, UnknownOptionError
from seqjit.kernels.sampling import philox
from seqjit.models.contract import DEFAULT_MAX_LENGTH

from .options import SUPPRESSION_OPTIONS, DecodingOptions, unknown_options_message
from .results import GenerationResult

__all__ = ["pad_sources", "given_options", "parse_options", "resolve_rules", "suppressed_tokens", "check_generable",
           "check_vocab", "finished", "with_seed", "drain", "check_batching"]


def pad_sources(sources, pad_id: int, lengths=None) -> tuple[np.ndarray, np.ndarray]:
    """``sources`` (a list of token-id sequences of any lengths, or a 2-D int array with optional
    ``lengths``) as a padded int64 ``[B, S]`` array (S >= 1) and int64 ``[B]`` lengths in [0, S]: the
    one check of a decoding call's ids (with :func:`check_vocab`); its batches start from them
    unchecked (``Seq2SeqModel.start_checked``)."""
    if isinstance(sources, np.ndarray) and sources.ndim == 2:
        if sources.dtype.kind not in "iu":
            raise TypeError(f"sources must hold integer token ids, got dtype {sources.dtype}")
        if sources.shape[0] == 0:
            raise ValueError("sources is empty: give at least one source sequence")
        if sources.shape[1] == 0:
            raise ValueError(f"sources must have shape [B, L] with L >= 1, got {list(sources.shape)}")
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


def given_options(options: dict) -> dict:
    """The decoding options a caller gave by keyword (``max_length`` given as the signature's default
    object, :data:`~seqjit.models.contract.DEFAULT_MAX_LENGTH`, counts as not given);
    UnknownOptionError for any other name."""
    if not _OPTION_NAMES.issuperset(options):
        raise UnknownOptionError(unknown_options_message(sorted(set(options) - _OPTION_NAMES), _OPTION_NAMES))
    if options.get("max_length", 0) is DEFAULT_MAX_LENGTH:
        options = {k: v for k, v in options.items() if k != "max_length"}
    return options


#: checked options by the keyword arguments that gave them (each value with its type: 1, 1.0 and
#: True are different arguments), so a repeated call skips the checks; cleared when it grows large
_checked: dict = {}
MAX_CHECKED = 256


def parse_options(kwargs) -> DecodingOptions:
    """The checked :class:`DecodingOptions` of ``generate``'s keyword arguments; TypeError naming an
    unknown one (with the nearest known names), ValueError for a bad value."""
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
        raise UnknownOptionError(unknown_options_message(unknown, names))
    opts = DecodingOptions(**kwargs).validate()
    if key is not None:
        if len(_checked) >= MAX_CHECKED:
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
    for name in ("forced_bos_id", "forced_eos_id", "end_token") + SUPPRESSION_OPTIONS:
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
        for name, tokens in (("end_token", opts.end_ids(0) if opts.end_token is not None else ()),
                             ("suppress_tokens", opts.suppress_tokens), ("begin_suppress_tokens", opts.begin_suppress_tokens),
                             ("bad_words_ids", [t for w in opts.bad_words_ids for t in w])):
            outside = [t for t in tokens if t >= vocab]
            if outside:
                raise ValueError(f"{name} holds token id {outside[0]}, outside the target vocabulary [0, {vocab})")
    return opts


def suppressed_tokens(model, opts: DecodingOptions) -> tuple:
    """Tokens never generated (the options resolved by :func:`resolve_rules`): ``suppress_tokens``,
    the one-token ``bad_words_ids`` (but the end token, as ``transformers``) and the padding token
    unless ``suppress_pad_token`` is False (or it is the end token)."""
    eos, pad = model.eos_id, model.pad_id
    banned = set(opts.suppress_tokens or ()) | {w[0] for w in opts.bad_words_ids or () if len(w) == 1 and w[0] != eos}
    if opts.suppress_pad_token is not False and pad is not None and pad != eos:
        banned.add(pad)
    banned = tuple(sorted(int(t) for t in banned))
    check_generable(model, opts, banned)
    return banned


def check_generable(model, opts: DecodingOptions, banned: tuple) -> None:
    """:class:`~seqjit.errors.NothingGenerable` when the options alone leave no token at a step every
    decode reaches: step 0, and each next step while the steps before can neither end (the end token
    banned before ``min_length``) nor choose (a forced token). ``banned``: :func:`suppressed_tokens`.
    Past ``max(min_length, the begin step + 1)`` the bans no longer change, so the steps checked are
    at most that many; the decoding loops check every step's scores themselves."""
    vocab, eos = model.target_vocab_size, model.eos_id
    if vocab is None or eos is None:
        return
    base = set(banned)
    begin_step = 1 if opts.forced_bos_id is not None else 0
    begin = set(opts.begin_suppress_tokens or ()) - base
    for g in range(min(opts.max_length, max(opts.min_length, begin_step + 1) + 1)):
        forced = opts.forced_eos_id if g == opts.max_length - 1 and opts.forced_eos_id is not None else \
            (opts.forced_bos_id if g == 0 else None)
        if forced is not None:
            if forced == eos:
                return
            continue
        eos_banned = eos in base or g < opts.min_length
        count = len(base) + (eos not in base and g < opts.min_length)
        if g == begin_step:
            count += len(begin - {eos}) if g < opts.min_length else len(begin)
            eos_banned = eos_banned or eos in begin
        if count >= vocab:
            raise NothingGenerable(f"decoding step {g}: every token id of the target vocabulary [0, {vocab}) is "
                                   f"banned by {_banning_options(model, opts, g, begin_step)}: nothing can be "
                                   "generated")
        if not eos_banned:
            return


def _banning_options(model, opts: DecodingOptions, step: int, begin_step: int) -> str:
    """The options that ban tokens at ``step``, named for :class:`NothingGenerable`."""
    names = [name for name in ("suppress_tokens", "bad_words_ids") if getattr(opts, name)]
    if opts.suppress_pad_token is not False and model.pad_id is not None and model.pad_id != model.eos_id:
        names.append(f"suppress_pad_token (the padding token {model.pad_id})")
    if step < opts.min_length:
        names.append(f"min_length {opts.min_length} (the end token {model.eos_id})")
    if step == begin_step and opts.begin_suppress_tokens:
        names.append("begin_suppress_tokens")
    return ", ".join(names)


def check_batching(max_batch_size, callback, opts: DecodingOptions) -> None:
    """``generate``'s batching arguments, the same on every device: ``max_batch_size`` a positive
    integer (not a bool), a ``callback`` only with greedy search or sampling."""
    if not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool) or max_batch_size < 1:
        raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
    if callback is not None and opts.beam_size > 1:
        raise ValueError("callback is only supported with beam_size=1 (greedy or sampling)")


def check_vocab(model, ids, lengths) -> None:
    """ValueError naming the first source holding a token id outside ``model``'s source vocabulary
    (padding past a row's length is not looked at)."""
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


def finished(res, opts, length) -> GenerationResult:
    """``res`` as ``generate`` returns it: scores only when asked for, the attention's source axis as
    long as the source (as when it is decoded alone)."""
    if not opts.return_scores:
        res.scores = None
    if res.attention is not None:
        res.attention = [a[..., :max(1, int(length))] for a in res.attention]
    return res


def with_seed(opts: DecodingOptions) -> DecodingOptions:
    """Sampling without a seed: ``opts`` with a fresh one, drawn once for the whole call (every batch
    of it draws from the one stream)."""
    if opts.sampling and opts.seed is None:
        return dataclasses.replace(opts, seed=philox.fresh_seed())
    return opts


def drain(gen):
    """Run generator ``gen`` (a decoding loop that yields tokens as it goes) to its end; its return value."""
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value
