"""``return_alternatives``: the ``num_hypotheses`` best tokens at the first position after each
source's ``target_prefix`` (none: the first position), each continued by the call's search
(CTranslate2's ``return_alternatives``, typically for interactive translation: "what could come
next here").

As CTranslate2 4.8 decodes (``decode_alternatives``): the prefix is forced; at the first free
position the end tokens are banned, the other processors apply, and the ``num_hypotheses`` best
tokens of the log-softmax of those scores are the alternatives (best first, ties to the lower id;
those less likely than ``min_alternative_expansion_prob`` dropped);
each alternative is then decoded on as ``prefix + [token]`` by the call's search (greedy, sampling
or beam, one hypothesis each). A hypothesis's score is its alternative's log-probability plus the
score of its continuation (the prefix and the alternative left out of the latter, its length
penalty dividing by the whole length). The alternatives keep their expansion order.

Two passes over the ordinary loops: the expansion (the Python loop with :class:`Expansion`, which
stops each row at its first free step) and the continuations (``generate`` with the extended
prefixes, on whichever path accepts them).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from seqjit.errors import NothingGenerable

from . import prefix as prefixes
from .greedy import Argmax, TokenChooser
from .inputs import drain
from .loop import decode_loop
from .processors import log_softmax
from .results import GenerationResult


class Expansion(TokenChooser):
    """The loop's chooser for the expansion pass: the prefix forced, then at each row's first free
    step the ``n`` best tokens (end tokens banned) recorded in :attr:`found` (by row of the batch:
    ``(tokens, log-probabilities)``), and the row finished."""

    def __init__(self, model, batch: int, options, suppressed, prefix, n: int):
        super().__init__(model, batch, options, suppressed, True, None, prefix)
        self.pick, self.n = Argmax(), n  # forced steps only: the pick is never a free token
        self.least = float(options.min_alternative_expansion_prob)
        self.found: list = [None] * batch

    def choose(self, scores, t, attention):
        first = np.flatnonzero(self._prefix_len == t)  # live rows at their first free step
        picked = super().choose(scores, t, attention)
        if first.size:
            free = scores[first].astype(np.float32, copy=True)
            free[:, list(self.ends)] = -np.inf
            logp = log_softmax(free)
            order = np.argsort(-logp, axis=-1, kind="stable")[:, :self.n]
            for i, (r, best) in enumerate(zip(first.tolist(), order)):
                keep = best[np.isfinite(logp[i, best])]
                if self.least > 0:  # best first: the ones above the bar
                    keep = keep[np.exp(logp[i, keep].astype(np.float64)) >= self.least]
                if not keep.size and not self.least:  # only an end token could follow
                    raise NothingGenerable(f"decoding step {t}: row {int(self.alive[r])} has no alternative but the "
                                           "end token (return_alternatives bans it at the first free position)")
                self.found[int(self.alive[r])] = (keep.tolist(), logp[i, keep].astype(np.float64).tolist())
            picked[3][first] = True
        return picked


def expand(model, batch, spec) -> list:
    """Per row of ``batch`` (a :class:`~seqjit.decoding.batch.SourceBatch`): ``(tokens,
    log-probabilities)`` of its alternatives, or None when its prefix fills ``max_length``."""
    state = model.start_checked(batch.ids, batch.lengths, max_length=spec.max_length)
    try:
        options = dataclasses.replace(spec, sampling_topk=1, beam_size=1, num_hypotheses=1)
        chooser = Expansion(model, len(batch), options, spec.suppressed, batch.prefix, spec.num_hypotheses)
        drain(decode_loop(model, state, options, chooser, suppressed=spec.suppressed))
    finally:
        state.close()
    return chooser.found


def decode_alternatives(model, batch, spec, given: dict, max_batch_size: int, continue_decoding) -> list:
    """The results of a ``return_alternatives`` call (rows of ``batch`` in the caller's order, every
    option checked: ``spec``; ``given``: the options as the caller gave them), each alternative
    decoded on by ``continue_decoding(sources, lengths, options)`` (``generate``'s decode)."""
    plen = prefixes.lengths(batch.prefix, len(batch))
    found: list = [None] * len(batch)
    for part in batch.batches(max_batch_size):
        for row, alts in zip(part.index.tolist(), expand(model, part, spec)):
            found[row] = alts
    rows, extended, first = [], [], []
    for row, alts in enumerate(found):
        head = [] if batch.prefix is None else batch.prefix[row, :plen[row]].tolist()
        for token, logp in zip(*(alts or ((), ()))):
            rows.append(row)
            extended.append(head + [token])
            first.append(logp)
    conts = []
    if rows:
        options = {**given, "target_prefix": extended, "num_hypotheses": 1, "return_alternatives": False,
                   "return_scores": True, "max_input_length": 0, "truncate_input": False}
        if spec.seed is not None or spec.sampling:
            options["seed"] = spec.seed
        take = np.array(rows, np.int64)
        conts = continue_decoding(batch.ids[take], batch.lengths[take], options)
    results, k = [], 0
    for row, alts in enumerate(found):
        if alts is None:  # the prefix fills max_length: it is every hypothesis
            head = batch.prefix[row, :plen[row]].tolist()
            results.append(GenerationResult([head] * spec.num_hypotheses, [0.0] * spec.num_hypotheses))
            continue
        mine, k = range(k, k + len(alts[0])), k + len(alts[0])  # rows are in order
        results.append(GenerationResult([conts[k].ids[0] for k in mine], [first[k] + conts[k].scores[0] for k in mine],
                                        [conts[k].attention[0] for k in mine] if spec.return_attention else None))
    return results
