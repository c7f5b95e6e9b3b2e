"""``target_prefix``: per source, target tokens forced after the decoder start token, then free
decoding (CTranslate2's ``Translator.translate_batch(target_prefix=...)``).

The semantics, as CTranslate2 4.8 decodes (measured on the same converted model, see
``tests/decoding/test_target_prefix.py``): the hypotheses begin with the prefix; its tokens'
log-probabilities are not in the scores (a forced token adds 0, as a forced first token does);
``max_length`` (CTranslate2's ``max_decoding_length``) and ``min_length`` count the prefix, and a
beam hypothesis's length penalty divides by its whole length, prefix included. The tokens equal
``transformers``' ``generate`` given the prefix after the start token as ``decoder_input_ids``
(whose beam scores divide by the generated length only: the same with ``length_penalty=0``).

The decode loops force the prefix one step at a time: at step t < len(prefix) a row's scores are
-inf but for ``prefix[t]`` (0), after every other processor (:func:`force`), and an end token in a
prefix does not end it. Rows carry their prefix as an int64 ``[rows, P]`` array padded with -1
(:func:`prefix_rows`), permuted with the sources (:class:`~seqjit.decoding.batch.SourceBatch`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

NONE = -1  # a row's prefix array past its prefix


def checked_prefix(model, opts, n_sources: int):
    """``opts`` with its ``target_prefix`` checked against the call (one entry per source, each id in
    the target vocabulary, at most the resolved ``max_length`` long): None when no entry holds a
    token (every path then decodes as without one). ValueError naming ``target_prefix``."""
    prefix = opts.target_prefix
    if prefix is None:
        return opts
    if len(prefix) != n_sources:
        raise ValueError(f"target_prefix must have one entry per source ({n_sources}), got {len(prefix)}")
    vocab = getattr(model, "target_vocab_size", None)
    for i, entry in enumerate(prefix):
        if len(entry) > opts.max_length:
            raise ValueError(f"target_prefix[{i}] has {len(entry)} tokens, more than max_length {opts.max_length}")
        if vocab is not None and entry and max(entry) >= vocab:
            raise ValueError(f"target_prefix[{i}] holds token id {max(entry)}, outside the target vocabulary "
                             f"[0, {vocab})")
    if not any(prefix):
        return dataclasses.replace(opts, target_prefix=None)
    return opts


def prefix_rows(prefix) -> np.ndarray | None:
    """The per-source prefixes (a tuple of id tuples, or None) as int64 ``[rows, P]`` padded with
    :data:`NONE` (P >= 1); None for None."""
    if prefix is None:
        return None
    width = max(1, max(len(p) for p in prefix))
    rows = np.full((len(prefix), width), NONE, np.int64)
    for i, p in enumerate(prefix):
        rows[i, :len(p)] = p
    return rows


def lengths(rows: np.ndarray | None, n: int) -> np.ndarray:
    """Each row's prefix length (int64 [n]; zeros without prefixes)."""
    if rows is None:
        return np.zeros(n, np.int64)
    return (rows != NONE).sum(axis=1)


def at(rows: np.ndarray | None, t: int) -> np.ndarray | None:
    """Each row's forced token at step ``t`` (:data:`NONE`: not forced), or None when no row is."""
    if rows is None or t >= rows.shape[1]:
        return None
    tokens = rows[:, t]
    return tokens if (tokens != NONE).any() else None


def force(scores: np.ndarray, tokens: np.ndarray | None) -> None:
    """Each row r with ``tokens[r]`` forced: every score -inf but that token's, 0 (chosen whatever the
    model says, adding nothing to the score); applied after the other processors."""
    if tokens is None:
        return
    rows = np.flatnonzero(tokens != NONE)
    scores[rows] = -np.inf
    scores[rows, tokens[rows]] = 0
