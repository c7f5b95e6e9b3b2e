"""NumPy reference of the beam-search step: the readable specification of :mod:`.cuda`.

The semantics are those of :func:`seqjit.decoding.beam.beam_search` (``transformers``' beam search),
written per step over every source with an ``active`` flag instead of leaving sources out:

``beam_topk(logp, run_scores, active, k2)``: per active source ``s`` (rows ``s*K .. s*K+K-1`` of
``logp [n_src*K, V]``), the ``k2`` best of ``total[b*V + v] = logp[s*K+b, v] + run_scores[s, b]``
(float32), best first, ties to the lower flat index, NaN last: ``(scores [n_src, k2], index
[n_src, k2])``. Inactive rows are left as they are in ``out_scores`` / ``out_index``.

``beam_advance(...)``: one step's bookkeeping from those ``2K`` candidates, per active source:

- a candidate ends when its token is ``eos_id`` or ``t + 1 == max_len``;
- running beams: the ``K`` best candidates that do not end (ended ones pushed down by ``NEG``):
  their token histories (``run_tokens``, ``[n_src, K, max_len]``) and scores;
- finished hypotheses: the ``K`` best of the kept ones and the ending candidates among the first
  ``K``, each scored ``score / divisor`` (``divisor = float32((t + 1) ** length_penalty)``): tokens,
  lengths, scores, done flags;
- ``improvable``: a running beam can still beat the worst finished hypothesis;
- ``status[s] = improvable + 2 * (every candidate ends)`` (0 for an inactive source), and the source
  stays active only while improvable;
- ``src_rows[s*K + k] = s*K + (beam the new beam k comes from)`` (identity for inactive sources) and
  ``tokens[s*K + k]`` its new last token: the state reorder and the next step's input.

Token histories are double-buffered (``*_in`` read, ``*_out`` written; only positions ``<= t`` are
meaningful); the other arrays are updated in place.
"""
from __future__ import annotations

import numpy as np

NEG = np.float32(-1.0e9)


def _top(values: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-values, axis=-1, kind="stable")[:, :k]


def beam_topk(logp, run_scores, active, k2, out_scores=None, out_index=None):
    n_src, K = run_scores.shape
    vocab = logp.shape[1]
    out_scores = np.zeros((n_src, k2), np.float32) if out_scores is None else out_scores
    out_index = np.zeros((n_src, k2), np.int64) if out_index is None else out_index
    act = np.flatnonzero(active)
    total = (logp.reshape(n_src, K, vocab)[act] + run_scores[act][:, :, None]).reshape(act.shape[0], K * vocab)
    cand = _top(total, k2)
    out_scores[act] = np.take_along_axis(total, cand, axis=1)
    out_index[act] = cand
    return out_scores, out_index


def beam_advance(cand_scores, cand_index, vocab, t, max_len, eos_id, divisor, run_tokens_in, run_tokens_out,
                 run_scores, fin_tokens_in, fin_tokens_out, fin_len, fin_scores, fin_done, active, status,
                 src_rows, tokens):
    n_src, K = run_scores.shape
    act = np.flatnonzero(active)
    A = act.shape[0]
    src_rows[:] = np.arange(n_src * K)
    status[:] = 0
    run_tokens_out[:] = run_tokens_in
    fin_tokens_out[:] = fin_tokens_in
    if A == 0:
        return
    cs = cand_scores[act]
    cand_beam, cand_token = cand_index[act] // vocab, cand_index[act] % vocab
    ends = (cand_token == eos_id) | (t + 1 >= max_len)
    masked = cs + ends * NEG
    pick = _top(masked, K)
    new_beam = np.take_along_axis(cand_beam, pick, axis=1)
    old_run = run_tokens_in[act]
    new_tokens = np.take_along_axis(old_run, new_beam[:, :, None], axis=1)
    new_tokens[:, :, t] = np.take_along_axis(cand_token, pick, axis=1)
    normed = cs / divisor
    normed = normed + (~ends | (np.arange(2 * K) >= K)[None, :]) * NEG
    cand_seq = np.take_along_axis(old_run, cand_beam[:, :, None], axis=1)
    cand_seq[np.arange(A)[:, None], np.arange(2 * K)[None, :], t] = cand_token
    merged_scores = np.concatenate([fin_scores[act], normed], axis=1)
    keep = _top(merged_scores, K)
    merged_tokens = np.concatenate([fin_tokens_in[act], cand_seq], axis=1)
    merged_len = np.concatenate([fin_len[act], np.full((A, 2 * K), t + 1)], axis=1)
    merged_done = np.concatenate([fin_done[act].astype(bool), ends & (np.arange(2 * K) < K)[None, :]], axis=1)
    fin_scores[act] = np.take_along_axis(merged_scores, keep, axis=1)
    fin_tokens_out[act] = np.take_along_axis(merged_tokens, keep[:, :, None], axis=1)
    fin_len[act] = np.take_along_axis(merged_len, keep, axis=1)
    fin_done[act] = np.take_along_axis(merged_done, keep, axis=1)
    run_tokens_out[act] = new_tokens
    run_scores[act] = np.take_along_axis(masked, pick, axis=1)
    best_running = run_scores[act, 0] / divisor
    worst = np.where(fin_done[act].astype(bool), fin_scores[act].min(axis=1, keepdims=True), NEG)
    improvable = (best_running[:, None] > worst).any(axis=1)
    status[act] = improvable.astype(np.int64) + 2 * ends.all(axis=1)
    active[act] = improvable
    rows = act[:, None] * K
    src_rows[(rows + np.arange(K)[None, :]).reshape(-1)] = (rows + new_beam).reshape(-1)
    tokens[(rows + np.arange(K)[None, :]).reshape(-1)] = new_tokens[:, :, t].reshape(-1)
