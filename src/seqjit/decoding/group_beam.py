"""Group (diverse) beam search: the beam step of the decode loop with ``num_beam_groups`` > 1, with the
semantics of ``transformers`` 4.x's ``group_beam_search`` (transformers 5 runs it from a Hub repository).

The K = ``beam_size`` beams of a source are G groups of B = K / G beams (group g: beams gB .. gB + B - 1).
Each step, group by group: the group's log-softmax, lowered by ``diversity_penalty`` times the number of
beams of the earlier groups that chose each token at this step (Hamming diversity, applied first as
``transformers``' HammingDiversityLogitsProcessor), then the score processors, then a beam step of the
group's own (``transformers``' BeamSearchScorer with group_size B): the best ``max(2, 1 + ends) x B``
continuations; the ending ones among the first B become finished hypotheses (at most B per group, the
best by ``sum / length ** length_penalty``, in float64 as there); the best B that do not end keep running.
A group is done once it holds B hypotheses and its best candidate's ``sum / length ** length_penalty``
(ending or not: ``transformers`` 4's heuristic, where :mod:`seqjit.decoding.beam` follows transformers 5
and reads the best running beam) does not beat the worst of them. A done group's beams stand still,
their token read as the padding token (``transformers`` pads them; it counts in the later groups'
penalty). At ``max_length`` the running beams of the groups not done join their hypotheses. A source
leaves the batch once all its groups are done; its results are the ``num_hypotheses`` best hypotheses
of all its groups.
"""
from __future__ import annotations

import numpy as np

from . import processors
from .beam import _NEG, BeamChooser, _check_some_left, _results, _top, beam_search
from .inputs import drain
from .loop import decode_loop


def group_beam_search(model, state, options, *, suppressed=(), prefix=None):
    """:func:`seqjit.decoding.beam.beam_search` with ``options.num_beam_groups`` > 1: the decode loop
    with a :class:`GroupBeamChooser` (the same arguments and results)."""
    chooser = GroupBeamChooser(model, state.batch, options, prefix, suppressed)
    return drain(decode_loop(model, state, options, chooser, suppressed=suppressed))


def python_beam_search(model, state, options, *, suppressed=(), prefix=None):
    """The Python loop's beam search for ``options``: :func:`group_beam_search` with
    ``num_beam_groups`` > 1, else :func:`seqjit.decoding.beam.beam_search` (picked here: ``beam.py``
    cannot import this module without an import circle)."""
    search = group_beam_search if options.num_beam_groups > 1 else beam_search
    return search(model, state, options, suppressed=suppressed, prefix=prefix)


class GroupBeamChooser(BeamChooser):
    """The group beam step (see the module docstring); the loop protocol of :mod:`seqjit.decoding.loop`.
    ``prepare`` only keeps the logits: the processors run per group in :meth:`choose`, after the
    diversity penalty (``suppressed``: the tokens never generated, as the loop would pass them)."""

    def __init__(self, model, n_src: int, options, prefix=None, suppressed=()):
        super().__init__(model, n_src, options, prefix)
        G = options.num_beam_groups
        B = self.K // G
        self.G, self.B, self.suppressed = G, B, suppressed
        self.penalty = np.float32(options.diversity_penalty)
        self.pad = getattr(model, "pad_id", None)
        self.eos = self.ends[0] if len(self.ends) == 1 else self.ends  # what the processors ban before min_length
        self.n_cand = max(2, 1 + len(self.ends)) * B
        self.run_scores = np.tile(np.array(([0.0] + [_NEG] * (B - 1)) * G, np.float32), (n_src, 1))
        # each group's finished hypotheses (transformers' BeamHypotheses of B), by source
        self.fin_tokens = np.zeros((n_src, G, B, self.max_len), np.int64)
        self.fin_len = np.zeros((n_src, G, B), np.int64)
        self.fin_scores = np.full((n_src, G, B), -np.inf)  # float64, as transformers scores them
        self.fin_done = np.zeros((n_src, G, B), bool)        # the slot holds a hypothesis
        self.group_done = np.zeros((n_src, G), bool)
        self.logits = None

    def prepare(self, logits, t):
        self.logits = np.asarray(logits, dtype=np.float32)
        return None  # the processors run per group, in choose

    def choose(self, scores, t, attention):
        active, K, B, G, lp = self.active, self.K, self.B, self.G, self.lp
        A, vocab = active.shape[0], self.logits.shape[-1]
        logits = self.logits.reshape(A, K, vocab)
        history = self.history().reshape(A, K, -1)
        prefix = self.prefixes()
        prefix = None if prefix is None else prefix.reshape((A, K) + prefix.shape[1:])
        last = t + 1 >= self.max_len
        divisor = float((t + 1) ** lp)
        chosen = np.zeros((A, K), np.int64)   # this step's token of every beam (the penalty counts them)
        src_rows = np.arange(A)[:, None] * K + np.arange(K)[None, :]  # the row each beam comes from
        for g in range(G):
            beams = slice(g * B, (g + 1) * B)
            done = self.group_done[active, g]
            logp = processors.log_softmax(logits[:, beams].reshape(A * B, vocab))
            if g and self.penalty:
                counts = np.zeros((A, vocab), np.float32)
                np.add.at(counts, (np.repeat(np.arange(A), g * B), chosen[:, :g * B].reshape(-1)), 1)
                logp -= np.repeat(self.penalty * counts, B, axis=0)
            processors.process(logp, history[:, beams].reshape(A * B, -1), t, self.options, self.eos, self.suppressed,
                               None if prefix is None else prefix[:, beams].reshape((A * B,) + prefix.shape[2:]))
            self._group_step(g, logp.reshape(A, B * vocab), vocab, t, last, divisor, ~done, chosen, src_rows)
            if self.pad is not None:
                chosen[done, beams] = self.pad
        if last:  # transformers' finalize: the running beams of the groups not done join their hypotheses
            for g in range(G):
                keep = ~self.group_done[active, g]
                beams = slice(g * B, (g + 1) * B)
                self._add(g, keep, self.run_tokens[active, beams], self.run_scores[active, beams] / divisor,
                          np.ones((A, B), bool), t + 1)
        alive = ~self.group_done[active].all(axis=1)
        over = last or not alive.any()
        self.next = None if over else (src_rows, alive)
        return None

    def _group_step(self, g, total, vocab, t, last, divisor, live, chosen, src_rows) -> None:
        """Group ``g``'s beam step on its processed scores ``total`` [A, B * V] (beam-major) for the
        sources whose group is not done (``live`` [A])."""
        active, B = self.active, self.B
        A = active.shape[0]
        beams = slice(g * B, (g + 1) * B)
        total = (total.reshape(A, B, vocab) + self.run_scores[active, beams][:, :, None]).reshape(A, B * vocab)
        _check_some_left(total[live], self.fin_done[active[live], g], active[live], t)
        cand = _top(total, self.n_cand)
        cand_scores = np.take_along_axis(total, cand, axis=1)
        cand_beam, cand_token = cand // vocab, cand % vocab
        ends = np.isin(cand_token, self.ends) & (t >= self.prefix_len[active])[:, None]
        # finished: the ending candidates among the first B
        cand_seq = np.take_along_axis(self.run_tokens[active, beams], cand_beam[:, :, None], axis=1)
        cand_seq[:, :, t] = cand_token
        first = ends & (np.arange(self.n_cand) < B)[None, :]
        self._add(g, live, cand_seq, cand_scores.astype(np.float64) / divisor, first, t + 1)
        # running: the best B that do not end
        pick = _top(cand_scores + ends * _NEG, B)
        new_beam = np.take_along_axis(cand_beam, pick, axis=1)
        new_tokens = np.take_along_axis(self.run_tokens[active, beams], new_beam[:, :, None], axis=1)
        new_tokens[:, :, t] = np.take_along_axis(cand_token, pick, axis=1)
        new_scores = np.take_along_axis(cand_scores, pick, axis=1)
        rows, run = active[live], self.run_tokens
        run[rows, beams] = new_tokens[live]
        self.run_scores[rows, beams] = new_scores[live]
        chosen[live, beams] = new_tokens[live, :, t]
        src_rows[live, beams] = (np.flatnonzero(live)[:, None] * self.K + g * B + new_beam[live])
        if not last:  # done: B hypotheses, none of which the best candidate would beat
            full = self.fin_done[rows, g].all(axis=1)
            worst = self.fin_scores[rows, g].min(axis=1)
            self.group_done[rows, g] = full & (worst >= cand_scores[live, 0].astype(np.float64) / divisor)

    def _add(self, g, live, seqs, scores, valid, length: int) -> None:
        """Group ``g``'s new hypotheses ``seqs`` [A, n, max_len] scored ``scores`` (float64), where
        ``valid`` [A, n] and the source ``live`` [A], merged into its kept B best."""
        active = self.active
        rows = active[live]
        if not rows.size:
            return
        valid = valid[live]
        merged_scores = np.concatenate([self.fin_scores[rows, g], np.where(valid, scores[live], -np.inf)], axis=1)
        merged_valid = np.concatenate([self.fin_done[rows, g], valid], axis=1)
        keep = _top(np.where(merged_valid, merged_scores, -np.inf), self.B)
        merged_tokens = np.concatenate([self.fin_tokens[rows, g], seqs[live]], axis=1)
        merged_len = np.concatenate([self.fin_len[rows, g], np.full(valid.shape, length)], axis=1)
        self.fin_scores[rows, g] = np.take_along_axis(merged_scores, keep, axis=1)
        self.fin_tokens[rows, g] = np.take_along_axis(merged_tokens, keep[:, :, None], axis=1)
        self.fin_len[rows, g] = np.take_along_axis(merged_len, keep, axis=1)
        self.fin_done[rows, g] = np.take_along_axis(merged_valid, keep, axis=1)

    def results(self) -> list:
        n, K = self.n_src, self.K
        scores = np.where(self.fin_done, self.fin_scores, -np.inf).reshape(n, K)
        order = _top(scores, K)
        tokens = np.take_along_axis(self.fin_tokens.reshape(n, K, -1), order[:, :, None], axis=1)
        lengths = np.take_along_axis(self.fin_len.reshape(n, K), order, axis=1)
        return _results(tokens, lengths, np.take_along_axis(scores, order, axis=1), None,
                        () if self.options.return_end_token else self.ends, self.options.num_hypotheses,
                        self.prefix_len)
