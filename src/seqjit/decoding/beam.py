"""Beam search, the beam step of the decode loop (:mod:`seqjit.decoding.loop`), vectorised over
sources, with the semantics of ``transformers``' beam search.

Per source: ``K = beam_size`` running beams and up to K finished hypotheses. Each step scores
``K x V`` continuations by accumulated log-probability (log-softmax, then the score processors, as
``transformers`` does), keeps the best ``2K``; of those, candidates that end (end token or maximum
length) and rank among the first K become finished hypotheses scored ``sum / length ** length_penalty``;
the best K that do not end keep running. A source stops when no running beam can beat its worst
finished hypothesis (``transformers``' ``early_stopping=False`` heuristic) and then leaves the batch:
finished sources stop costing compute. Decoder state rows are reordered only where beams moved.
"""
from __future__ import annotations

import numpy as np

from seqjit.errors import NothingGenerable

from . import prefix as prefixes
from . import processors
from .inputs import drain
from .loop import decode_loop
from .results import GenerationResult

_NEG = np.float32(-1.0e9)


def _top(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of each row, best first (ties: lower index first)."""
    order = np.argsort(-values, axis=-1, kind="stable")
    return order[:, :k]


def beam_search(model, state, options, *, suppressed=(), prefix=None):
    """Decode every source row of ``state`` (a fresh DecoderState with one row per source): the
    decode loop (:func:`~seqjit.decoding.loop.decode_loop`) with a :class:`BeamChooser`. ``prefix``:
    each source's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`), or None."""
    chooser = BeamChooser(model, state.batch, options, prefix)
    return drain(decode_loop(model, state, options, chooser, suppressed=suppressed))


class BeamChooser:
    """The beam step of the decode loop (see :mod:`seqjit.decoding.loop` for the protocol): K
    running beams and up to K finished hypotheses per source, by source."""

    def __init__(self, model, n_src: int, options, prefix=None):
        K, max_len = options.beam_size, options.max_length
        self.n_src, self.K, self.max_len, self.options = n_src, K, max_len, options
        self.ends = options.end_ids(model.eos_id)
        self.start_id, self.lp = model.decoder_start_id, float(options.length_penalty)
        self.active = np.arange(n_src)                     # sources still decoding, in state row order
        self.run_tokens = np.zeros((n_src, K, max_len), np.int64)
        self.run_scores = np.tile(np.array([0.0] + [_NEG] * (K - 1), np.float32), (n_src, 1))
        self.fin_tokens = np.zeros((n_src, K, max_len), np.int64)
        self.fin_len = np.zeros((n_src, K), np.int64)
        self.fin_scores = np.full((n_src, K), _NEG, np.float32)
        self.fin_done = np.zeros((n_src, K), bool)
        self.run_attn = self.fin_attn = None
        self.next, self.t = None, 0  # the reorder after this step; the step whose history is kept
        self.prefix, self.prefix_len = prefix, prefixes.lengths(prefix, n_src)  # by source

    def start(self, state) -> None:
        state.reorder(np.repeat(np.arange(self.n_src), self.K))

    def history(self) -> np.ndarray:
        rows, t = self.active.shape[0] * self.K, self.t
        return np.concatenate([np.full((rows, 1), self.start_id, np.int64),
                               self.run_tokens[self.active, :, :t].reshape(rows, t)], axis=1)

    def prefixes(self):
        return None if self.prefix is None else np.repeat(self.prefix[self.active], self.K, axis=0)

    def prepare(self, logits, t):
        return processors.log_softmax(np.asarray(logits, dtype=np.float32))  # a new array: logits stay as they are

    def choose(self, logp, t, attention):
        active, K, max_len, lp = self.active, self.K, self.max_len, self.lp
        A = active.shape[0]
        if attention is not None:
            if self.run_attn is None:
                self.run_attn = np.zeros((self.n_src, K, max_len) + attention.shape[1:], np.float32)
                self.fin_attn = np.zeros_like(self.run_attn)
            self.run_attn[active, :, t] = attention.reshape((A, K) + attention.shape[1:])
        run_tokens, fin_done = self.run_tokens, self.fin_done
        vocab = logp.shape[-1]
        total = (logp.reshape(A, K, vocab) + self.run_scores[active][:, :, None]).reshape(A, K * vocab)
        _check_some_left(total, fin_done[active], active, t)
        cand = _top(total, 2 * K)                                         # [A, 2K]
        cand_scores = np.take_along_axis(total, cand, axis=1)
        cand_beam, cand_token = cand // vocab, cand % vocab
        ends = (np.isin(cand_token, self.ends) & (t >= self.prefix_len[active])[:, None]) | (t + 1 >= max_len)
        # running beams for the next step: the best K candidates that do not end
        pick = _top(cand_scores + ends * _NEG, K)
        new_beam = np.take_along_axis(cand_beam, pick, axis=1)
        new_tokens = np.take_along_axis(run_tokens[active], new_beam[:, :, None], axis=1)
        new_tokens[:, :, t] = np.take_along_axis(cand_token, pick, axis=1)
        # finished hypotheses: ending candidates among the first K, merged with those already kept
        normed = cand_scores / np.float32((t + 1) ** lp)
        normed = normed + (~ends | (np.arange(2 * K) >= K)[None, :]) * _NEG
        cand_tok_seq = np.take_along_axis(run_tokens[active], cand_beam[:, :, None], axis=1)
        cand_tok_seq[np.arange(A)[:, None], np.arange(2 * K)[None, :], t] = cand_token
        merged_scores = np.concatenate([self.fin_scores[active], normed], axis=1)
        keep = _top(merged_scores, K)
        merged_tokens = np.concatenate([self.fin_tokens[active], cand_tok_seq], axis=1)
        merged_len = np.concatenate([self.fin_len[active], np.full((A, 2 * K), t + 1)], axis=1)
        merged_done = np.concatenate([fin_done[active], ends & (np.arange(2 * K) < K)[None, :]], axis=1)
        self.fin_scores[active] = np.take_along_axis(merged_scores, keep, axis=1)
        self.fin_tokens[active] = np.take_along_axis(merged_tokens, keep[:, :, None], axis=1)
        self.fin_len[active] = np.take_along_axis(merged_len, keep, axis=1)
        fin_done[active] = np.take_along_axis(merged_done, keep, axis=1)
        if self.run_attn is not None:
            run_attn, fin_attn = self.run_attn, self.fin_attn
            cand_attn = np.take_along_axis(run_attn[active], _expand(cand_beam, run_attn.ndim), axis=1)
            merged_attn = np.concatenate([fin_attn[active], cand_attn], axis=1)
            fin_attn[active] = np.take_along_axis(merged_attn, _expand(keep, run_attn.ndim), axis=1)
            run_attn[active] = np.take_along_axis(run_attn[active], _expand(new_beam, run_attn.ndim), axis=1)
        run_tokens[active] = new_tokens
        self.run_scores[active] = np.take_along_axis(cand_scores + ends * _NEG, pick, axis=1)
        # can a running beam still beat the worst finished hypothesis? (transformers' heuristic)
        best_running = self.run_scores[active, 0] / np.float32((t + 1) ** lp)
        worst_finished = np.where(fin_done[active], self.fin_scores[active].min(axis=1, keepdims=True), _NEG)
        improvable = (best_running[:, None] > worst_finished).any(axis=1)
        over = t + 1 >= max_len or ends.all() or not improvable.any()
        self.next = None if over else (np.arange(A)[:, None] * K + new_beam, improvable)  # row each new beam comes from
        return None

    def advance(self, done, t):
        if self.next is None:
            return None
        src_rows, improvable = self.next
        self.t = t + 1
        if improvable.all():  # rows move only among the beams of one source: encoder rows are equal
            return src_rows.reshape(-1), False
        self.active = self.active[improvable]
        return src_rows[improvable].reshape(-1), True

    def results(self) -> list:
        return _results(self.fin_tokens, self.fin_len, self.fin_scores, self.fin_attn,
                        () if self.options.return_end_token else self.ends, self.options.num_hypotheses,
                        self.prefix_len)


def _check_some_left(total: np.ndarray, done: np.ndarray, active: np.ndarray, t: int) -> None:
    """:class:`~seqjit.errors.NothingGenerable` for the first source whose continuations ``total``
    [A, K*V] are all -inf while it has no finished hypothesis (one that has some ends with them)."""
    dead = np.isneginf(total.max(axis=1)) & ~done.any(axis=1)
    if dead.any():
        raise NothingGenerable.at(t, int(active[np.flatnonzero(dead)[0]]))


def _expand(index: np.ndarray, ndim: int) -> np.ndarray:
    return index.reshape(index.shape + (1,) * (ndim - index.ndim))


def _results(tokens, lengths, scores, attn, eos, n_best, prefix_len=None):
    """One GenerationResult per source: its ``n_best`` hypotheses, an end token (``eos``: one id or
    a tuple of them) dropped from the end (not one of a ``target_prefix``: ``prefix_len`` [sources])."""
    ends = eos if isinstance(eos, tuple) else (eos,)
    results = []
    for s in range(tokens.shape[0]):
        ids, sc, at = [], [], []
        for h in range(n_best):
            seq = tokens[s, h, :lengths[s, h]].tolist()
            if len(seq) > (0 if prefix_len is None else prefix_len[s]) and seq[-1] in ends:
                seq.pop()
            ids.append(seq)
            sc.append(float(scores[s, h]))
            if attn is not None:
                at.append(attn[s, h, :lengths[s, h]].copy())
        results.append(GenerationResult(ids, sc, at if attn is not None else None))
    return results
