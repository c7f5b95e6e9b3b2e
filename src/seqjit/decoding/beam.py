"""Beam search, vectorised over sources, with the semantics of ``transformers``' beam search.

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

from . import processors
from .results import GenerationResult

_NEG = np.float32(-1.0e9)


def _top(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of each row, best first (ties: lower index first)."""
    order = np.argsort(-values, axis=-1, kind="stable")
    return order[:, :k]


def beam_search(model, state, options, *, suppressed=()):
    """Decode every source row of ``state`` (a fresh DecoderState with one row per source)."""
    n_src, K, eos, max_len = state.batch, options.beam_size, model.eos_id, options.max_length
    lp = float(options.length_penalty)
    state.reorder(np.repeat(np.arange(n_src), K))
    active = np.arange(n_src)                          # sources still decoding, in state row order
    run_tokens = np.zeros((n_src, K, max_len), np.int64)
    run_scores = np.tile(np.array([0.0] + [_NEG] * (K - 1), np.float32), (n_src, 1))
    fin_tokens = np.zeros((n_src, K, max_len), np.int64)
    fin_len = np.zeros((n_src, K), np.int64)
    fin_scores = np.full((n_src, K), _NEG, np.float32)
    fin_done = np.zeros((n_src, K), bool)
    want_attn = options.return_attention
    run_attn = fin_attn = None
    for t in range(max_len):
        rows = active.shape[0] * K
        history = np.concatenate(
            [np.full((rows, 1), model.decoder_start_id, np.int64), run_tokens[active, :, :t].reshape(rows, t)], axis=1)
        out = model.step(state, history[:, -1], with_attention=want_attn, copy=False)
        logits, attention = out if want_attn else (out, None)
        if want_attn and run_attn is None:
            run_attn = np.zeros((n_src, K, max_len) + attention.shape[1:], np.float32)
            fin_attn = np.zeros_like(run_attn)
        logp = processors.log_softmax(np.asarray(logits, dtype=np.float32))  # a new array: logits stay as they are
        processors.process(logp, history, t, options, eos, suppressed)
        if want_attn:
            run_attn[active, :, t] = attention.reshape((active.shape[0], K) + attention.shape[1:])
        vocab = logp.shape[-1]
        total = (logp.reshape(active.shape[0], K, vocab) + run_scores[active][:, :, None]).reshape(active.shape[0], K * vocab)
        _check_some_left(total, fin_done[active], active, t)
        cand = _top(total, 2 * K)                                         # [A, 2K]
        cand_scores = np.take_along_axis(total, cand, axis=1)
        cand_beam, cand_token = cand // vocab, cand % vocab
        ends = (cand_token == eos) | (t + 1 >= max_len)
        # running beams for the next step: the best K candidates that do not end
        pick = _top(cand_scores + ends * _NEG, K)
        new_beam = np.take_along_axis(cand_beam, pick, axis=1)
        new_tokens = np.take_along_axis(run_tokens[active], new_beam[:, :, None], axis=1)
        new_tokens[:, :, t] = np.take_along_axis(cand_token, pick, axis=1)
        # finished hypotheses: ending candidates among the first K, merged with those already kept
        normed = cand_scores / np.float32((t + 1) ** lp)
        normed = normed + (~ends | (np.arange(2 * K) >= K)[None, :]) * _NEG
        cand_tok_seq = np.take_along_axis(run_tokens[active], cand_beam[:, :, None], axis=1)
        cand_tok_seq[np.arange(active.shape[0])[:, None], np.arange(2 * K)[None, :], t] = cand_token
        merged_scores = np.concatenate([fin_scores[active], normed], axis=1)
        keep = _top(merged_scores, K)
        merged_tokens = np.concatenate([fin_tokens[active], cand_tok_seq], axis=1)
        merged_len = np.concatenate([fin_len[active], np.full((active.shape[0], 2 * K), t + 1)], axis=1)
        merged_done = np.concatenate([fin_done[active], ends & (np.arange(2 * K) < K)[None, :]], axis=1)
        fin_scores[active] = np.take_along_axis(merged_scores, keep, axis=1)
        fin_tokens[active] = np.take_along_axis(merged_tokens, keep[:, :, None], axis=1)
        fin_len[active] = np.take_along_axis(merged_len, keep, axis=1)
        fin_done[active] = np.take_along_axis(merged_done, keep, axis=1)
        if want_attn:
            cand_attn = np.take_along_axis(run_attn[active], _expand(cand_beam, run_attn.ndim), axis=1)
            merged_attn = np.concatenate([fin_attn[active], cand_attn], axis=1)
            fin_attn[active] = np.take_along_axis(merged_attn, _expand(keep, run_attn.ndim), axis=1)
            run_attn[active] = np.take_along_axis(run_attn[active], _expand(new_beam, run_attn.ndim), axis=1)
        run_tokens[active] = new_tokens
        run_scores[active] = np.take_along_axis(cand_scores + ends * _NEG, pick, axis=1)
        # can a running beam still beat the worst finished hypothesis? (transformers' heuristic)
        best_running = run_scores[active, 0] / np.float32((t + 1) ** lp)
        worst_finished = np.where(fin_done[active], fin_scores[active].min(axis=1, keepdims=True), _NEG)
        improvable = (best_running[:, None] > worst_finished).any(axis=1)
        if t + 1 >= max_len or ends.all() or not improvable.any():
            break
        src_rows = (np.arange(active.shape[0])[:, None] * K + new_beam)   # row each new beam comes from
        if improvable.all():  # rows move only among the beams of one source: encoder rows are equal
            state.reorder(src_rows.reshape(-1), encoder=False)
        else:
            state.reorder(src_rows[improvable].reshape(-1))
            active = active[improvable]
    return _results(fin_tokens, fin_len, fin_scores, fin_attn, eos, options.num_hypotheses)


def _check_some_left(total: np.ndarray, done: np.ndarray, active: np.ndarray, t: int) -> None:
    """:class:`~seqjit.errors.NothingGenerable` for the first source whose continuations ``total``
    [A, K*V] are all -inf while it has no finished hypothesis (one that has some ends with them)."""
    dead = np.isneginf(total.max(axis=1)) & ~done.any(axis=1)
    if dead.any():
        raise NothingGenerable.at(t, int(active[np.flatnonzero(dead)[0]]))


def _expand(index: np.ndarray, ndim: int) -> np.ndarray:
    return index.reshape(index.shape + (1,) * (ndim - index.ndim))


def _results(tokens, lengths, scores, attn, eos, n_best):
    results = []
    for s in range(tokens.shape[0]):
        ids, sc, at = [], [], []
        for h in range(n_best):
            seq = tokens[s, h, :lengths[s, h]].tolist()
            if seq and seq[-1] == eos:
                seq.pop()
            ids.append(seq)
            sc.append(float(scores[s, h]))
            if attn is not None:
                at.append(attn[s, h, :lengths[s, h]].copy())
        results.append(GenerationResult(ids, sc, at if attn is not None else None))
    return results
