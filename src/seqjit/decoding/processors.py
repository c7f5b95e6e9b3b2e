"""Score processors applied to one decoding step's scores ``[rows, V]`` in place.

``history`` is ``[rows, t]`` int64: each row's tokens so far, the decoder start token first (as the
``transformers`` processors see ``input_ids``). The order and semantics follow ``transformers``:
repetition penalty, no-repeat n-grams, minimum length, suppressed tokens (the static ban; the
first step's ``begin_suppress_tokens``; ``bad_words_ids`` sequences after their prefix), then the forced tokens
(``ForcedBOSTokenLogitsProcessor``, ``ForcedEOSTokenLogitsProcessor``: every other token -inf, the forced
one 0, so it is chosen whatever the model says and adds nothing to the score), and last a row's
``target_prefix`` token the same way (:mod:`seqjit.decoding.prefix`).
"""
from __future__ import annotations

import numpy as np

from seqjit.errors import NonFiniteLogits, NothingGenerable

from . import prefix

NEG_INF = -np.inf


def apply_repetition_penalty(scores: np.ndarray, history: np.ndarray, penalty: float) -> None:
    """Tokens already in a row's history: score / penalty when positive, score * penalty when negative."""
    if penalty == 1.0:
        return
    rows = np.arange(scores.shape[0])[:, None]
    seen = scores[rows, history]
    scores[rows, history] = np.where(seen < 0, seen * penalty, seen / penalty)


def banned_ngram_tokens(row: np.ndarray, n: int) -> list[int]:
    """Tokens that would repeat an n-gram of ``row`` if generated next."""
    length = row.shape[0]
    if length + 1 < n:
        return []
    if n == 1:
        return np.unique(row).tolist()
    prefix = row[length - n + 1:]
    banned = []
    for start in range(length - n + 1):
        if np.array_equal(row[start:start + n - 1], prefix):
            banned.append(int(row[start + n - 1]))
    return banned


def apply_no_repeat_ngram(scores: np.ndarray, history: np.ndarray, n: int) -> None:
    if n <= 0:
        return
    if n == 1:
        rows = np.arange(scores.shape[0])[:, None]
        scores[rows, history] = NEG_INF
        return
    for r in range(scores.shape[0]):
        banned = banned_ngram_tokens(history[r], n)
        if banned:
            scores[r, banned] = NEG_INF


def apply_min_length(scores: np.ndarray, generated: int, min_length: int, eos_id: int) -> None:
    """Forbid the end token while fewer than ``min_length`` tokens have been generated."""
    if generated < min_length:
        scores[:, list(eos_id) if isinstance(eos_id, tuple) else eos_id] = NEG_INF


def apply_suppressed(scores: np.ndarray, tokens) -> None:
    if tokens:
        scores[:, list(tokens)] = NEG_INF


def apply_begin_suppressed(scores: np.ndarray, generated: int, options, prefix_len=None) -> None:
    """``options.begin_suppress_tokens`` at the first generated step, the second after a forced first
    token (transformers' SuppressTokensAtBeginLogitsProcessor moves its begin index past a forced BOS);
    a row with a ``target_prefix`` (``prefix_len`` [rows] > 0) at the first step after it (there,
    past the prompt of ``decoder_input_ids``)."""
    tokens = options.begin_suppress_tokens
    if not tokens:
        return
    first = 1 if options.forced_bos_id is not None else 0
    if prefix_len is None:
        if generated == first:
            scores[:, list(tokens)] = NEG_INF
        return
    rows = np.flatnonzero(np.where(prefix_len > 0, prefix_len, first) == generated)
    scores[np.ix_(rows, list(tokens))] = NEG_INF


def apply_bad_words(scores: np.ndarray, history: np.ndarray, options, eos_id: int) -> None:
    """The last token of each ``options.bad_words_ids`` sequence where a row's history (the start
    token first) ends with the rest of it (one-token entries: banned every step, but the end token,
    as transformers' NoBadWordsLogitsProcessor; ``eos_id``: one id or a tuple of end ids)."""
    ends = eos_id if isinstance(eos_id, tuple) else (eos_id,)
    for word in options.bad_words_ids or ():
        if len(word) == 1:
            if word[0] not in ends:
                scores[:, word[0]] = NEG_INF
            continue
        n = len(word) - 1
        if history.shape[1] < n:
            continue
        rows = np.flatnonzero((history[:, history.shape[1] - n:] == np.asarray(word[:-1])).all(axis=1))
        scores[rows, word[-1]] = NEG_INF


def check_no_nan(scores: np.ndarray, step: int) -> None:
    """:class:`~seqjit.errors.NonFiniteLogits` when a row of ``scores`` holds NaN (one pass:
    ``np.min`` propagates NaN, and allocates nothing)."""
    if scores.size and np.isnan(np.min(scores)):
        row = int(np.flatnonzero(np.isnan(scores).any(axis=-1))[0])
        raise NonFiniteLogits.at(step, row)


def check_some_left(scores: np.ndarray, step: int) -> None:
    """:class:`~seqjit.errors.NothingGenerable` when a row of the processed ``scores`` is -inf for
    every token (greedy search and sampling: the row has no token to choose)."""
    if scores.size:
        dead = np.isneginf(np.max(scores, axis=-1))
        if dead.any():
            raise NothingGenerable.at(step, int(np.flatnonzero(dead)[0]))


def apply_forced(scores: np.ndarray, generated: int, options) -> None:
    """``options.forced_bos_id`` as the first generated token, ``options.forced_eos_id`` as the last
    one ``max_length`` allows (None: no rule; decoding resolves the model's rules into the options)."""
    token = None
    if generated == 0 and options.forced_bos_id is not None:
        token = options.forced_bos_id
    if generated == options.max_length - 1 and options.forced_eos_id is not None:  # applied last, as transformers
        token = options.forced_eos_id
    if token is not None:
        scores[:] = NEG_INF
        scores[:, token] = 0


def process(scores: np.ndarray, history: np.ndarray, generated: int, options, eos_id: int, suppressed,
            prefix_rows=None) -> np.ndarray:
    """The score processors in ``transformers``' order, after :func:`check_no_nan` (so every
    Python loop, greedy, sampling and beam, refuses a NaN step); ``prefix_rows``: each row's
    ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`, or None), forced last."""
    check_no_nan(scores, generated)
    apply_repetition_penalty(scores, history, options.repetition_penalty)
    apply_no_repeat_ngram(scores, history, options.no_repeat_ngram_size)
    apply_min_length(scores, generated, options.min_length, eos_id)
    apply_suppressed(scores, suppressed)
    apply_begin_suppressed(scores, generated, options,
                           None if prefix_rows is None else prefix.lengths(prefix_rows, scores.shape[0]))
    apply_bad_words(scores, history, options, eos_id)
    apply_forced(scores, generated, options)
    prefix.force(scores, prefix.at(prefix_rows, generated))
    return scores


def _certain(x: np.ndarray, m: np.ndarray) -> tuple:
    """``(x, m)`` with each row holding +inf (its max ``m``) read as probability one: 0 at its +inf
    entries (shared evenly), -inf elsewhere; ``inf - inf`` would otherwise make the row NaN."""
    sure = np.isposinf(m)
    if not sure.any():
        return x, m
    x = np.where(sure, np.where(np.isposinf(x), 0, NEG_INF).astype(x.dtype), x)
    return x, np.where(sure, 0, m).astype(m.dtype)


def _shifted_lse(x: np.ndarray) -> tuple:
    """``(x - m, log(sum(exp(x - m))))`` per row, m the row max (0 for rows of only -inf; rows
    holding +inf: see :func:`_certain`)."""
    x, m = _certain(x, np.max(x, axis=-1, keepdims=True))
    m = np.where(np.isfinite(m), m, 0)
    d = x - m
    e = np.exp(d)
    with np.errstate(divide="ignore"):
        return d, np.log(np.sum(e, axis=-1, keepdims=True))


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in the input's dtype; rows of only -inf stay -inf (not ``-inf - -inf``:
    NaN), so a beam whose every continuation is banned is told from a NaN step."""
    d, lse = _shifted_lse(x)
    d -= np.where(np.isneginf(lse), 0, lse).astype(d.dtype)
    return d


def token_log_probs(x: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """``log_softmax(x)[r, tokens[r]]`` for every row r (the same values, without the [rows, V] result)."""
    d, lse = _shifted_lse(x)
    rows = np.arange(tokens.shape[0])
    return d[rows, tokens] - lse[:, 0]


def _tempered(scores: np.ndarray, temperature: float) -> np.ndarray:
    """float64 ``scores / temperature``, each row first shifted by its max (softmax, top-k and top-p
    do not change), so a tiny temperature gives -inf below the max instead of overflowing to
    ``inf - inf`` (NaN); a row holding +inf is read as probability one (:func:`_certain`)."""
    x = scores.astype(np.float64)
    x, m = _certain(x, np.max(x, axis=-1, keepdims=True))
    x -= np.where(np.isfinite(m), m, 0)
    with np.errstate(over="ignore"):
        x /= temperature
    return x


def sample(scores: np.ndarray, options, draws: np.ndarray) -> np.ndarray:
    """One token per row: temperature, then top-k, then top-p (nucleus), as ``transformers``; then
    the inverse CDF of the kept tokens' softmax (in vocabulary order) at ``draws`` [rows], each row's
    uniform in [0, 1): the decode loops take them from :mod:`seqjit.kernels.sampling.philox`, keyed
    by (seed, source row, step), so every loop that samples a row at a step draws the same number."""
    logits = _tempered(scores, options.sampling_temperature)
    vocab = logits.shape[-1]
    k = options.sampling_topk
    if 0 < k < vocab:
        kth = np.partition(logits, vocab - k, axis=-1)[:, vocab - k][:, None]
        logits = np.where(logits < kth, NEG_INF, logits)
    if options.sampling_topp < 1.0:
        order = np.argsort(-logits, axis=-1, kind="stable")
        sorted_logits = np.take_along_axis(logits, order, axis=-1)
        probs = np.exp(log_softmax(sorted_logits))
        cumulative = np.cumsum(probs, axis=-1)
        remove = cumulative - probs >= options.sampling_topp  # keep the smallest set reaching p
        remove[:, 0] = False
        sorted_logits[remove] = NEG_INF
        logits = np.empty_like(logits)
        np.put_along_axis(logits, order, sorted_logits, axis=-1)
    probs = np.exp(log_softmax(logits))
    cumulative = np.cumsum(probs, axis=-1)
    targets = np.asarray(draws, np.float64) * cumulative[:, -1]
    tokens = (cumulative < targets[:, None]).sum(axis=-1)
    return np.minimum(tokens, vocab - 1)
