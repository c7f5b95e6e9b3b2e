"""NumPy reference for greedy_argmax: the readable specification (see :mod:`spec`)."""
from __future__ import annotations

import numpy as np

from . import spec


def greedy_argmax(logits, *, suppressed=(), eos_id=-1, step=0, min_length=0, out=None):
    """The greedy token of each row of ``logits`` ``[R, V]``: forbidden tokens -inf, then numpy.argmax."""
    logits, suppressed, ban_id, result = spec.prepare(logits, suppressed, eos_id, step, min_length, out)
    scores = np.array(logits, copy=True)
    scores[:, suppressed] = -np.inf
    if ban_id >= 0:
        scores[:, ban_id] = -np.inf
    result[...] = np.argmax(scores, axis=-1)
    return result


# -- the score processors and the greedy bookkeeping of a device decode loop ----------------------
# A row's history is ``[start_id] + tokens[r, :t]`` (the start token, then the t tokens generated so
# far), as ``seqjit.decoding.processors`` sees it; every function updates its arrays in place.

def _history(start_id, tokens, t):
    return np.concatenate([np.full((tokens.shape[0], 1), start_id, np.int64), np.asarray(tokens)[:, :t]], axis=1)


def ban_tokens(scores, suppressed, ban_id):
    """``scores[:, i] = -inf`` for every id of ``suppressed`` in ``[0, V)`` and for ``ban_id`` (>= 0)."""
    ids = [int(i) for i in np.asarray(suppressed).reshape(-1) if 0 <= i < scores.shape[1]]
    if ban_id >= 0:
        ids.append(int(ban_id))
    if ids:
        scores[:, ids] = -np.inf
    return scores


def repetition_penalty(scores, start_id, tokens, t, penalty):
    """Each token of a row's history, once: its score divided by ``penalty`` (multiplied when negative)."""
    hist = _history(start_id, tokens, t)
    rows = np.arange(scores.shape[0])[:, None]
    seen = scores[rows, hist]
    scores[rows, hist] = np.where(seen < 0, seen * np.float32(penalty), seen / np.float32(penalty))
    return scores


def no_repeat_ngram(scores, start_id, tokens, t, n):
    """-inf for every token that would repeat an n-gram of the row's history."""
    hist = _history(start_id, tokens, t)
    length = hist.shape[1]
    for r in range(scores.shape[0]):
        h = hist[r]
        if n == 1:
            scores[r, h] = -np.inf
            continue
        if length + 1 < n:
            continue
        prefix = h[length - n + 1:]
        for start in range(length - n + 1):
            if np.array_equal(h[start:start + n - 1], prefix):
                scores[r, h[start + n - 1]] = -np.inf
    return scores


def greedy_advance(scores, tokens, eos_id, t, done, history, total=None):
    """After a greedy step chose ``tokens`` from ``scores`` (the processed scores): ``history[:, t] =
    tokens``; rows not ``done`` add ``log_softmax(scores)[r, tokens[r]]`` to ``total`` (float64; None:
    no scores); then ``done`` marks the rows whose token is ``eos_id``."""
    history[:, t] = tokens
    if total is not None:
        x = np.asarray(scores, np.float32)
        m = np.max(x, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        d = x - m
        with np.errstate(divide="ignore"):
            lse = np.log(np.sum(np.exp(d), axis=-1))
        logp = d[np.arange(x.shape[0]), tokens] - lse
        total += np.where(done != 0, 0.0, logp)
    done[:] = (done != 0) | (tokens == eos_id)
    return done


def force_prefix(scores, prefix, t):
    """Each row r with ``prefix[r, t]`` >= 0 (``prefix``: int64 [R, P], -1 past a row's
    ``target_prefix``; no row when ``t >= P``): every score -inf but that token's, 0, as
    :func:`seqjit.decoding.prefix.force`."""
    if t < prefix.shape[1]:
        rows = np.flatnonzero(prefix[:, t] >= 0)
        scores[rows] = -np.inf
        scores[rows, prefix[rows, t]] = 0
    return scores


def prefix_running(done, prefix, t):
    """After :func:`greedy_advance` at step ``t``: the rows forced at t (``prefix[r, t]`` >= 0) not
    done (an end token of a ``target_prefix`` does not end its row)."""
    if t < prefix.shape[1]:
        done[prefix[:, t] >= 0] = 0
    return done
