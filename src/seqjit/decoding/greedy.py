"""Greedy decoding and sampling: one hypothesis per source, finished rows leave the batch."""
from __future__ import annotations

import numpy as np

from . import processors
from .results import GenerationResult, StepToken


def greedy_search(model, state, options, *, suppressed=(), on_token=None):
    """Decode every row of ``state`` (a fresh DecoderState) greedily or by sampling.

    Yields :class:`StepToken` as tokens are produced (for streaming) and returns the list of
    :class:`GenerationResult` (one per source row) as the generator's value. ``on_token(StepToken)``
    is called for every token; when it returns True, that source stops there.
    """
    batch = state.batch
    eos = model.eos_id
    rng = np.random.default_rng(options.seed)
    alive = np.arange(batch)                       # source index of each live row
    history = np.full((batch, 1), model.decoder_start_id, np.int64)
    scores = np.zeros(batch, np.float64)
    attn_hist = [[] for _ in range(batch)]
    results: list = [None] * batch
    for t in range(options.max_length):
        out = model.step(state, history[:, -1], with_attention=options.return_attention, copy=False)
        logits, attention = out if options.return_attention else (out, None)
        step_scores = np.array(logits, dtype=np.float32, copy=True)
        processors.process(step_scores, history, t, options, eos, suppressed)
        if options.sampling:
            tokens = processors.sample(step_scores, options, rng)
        else:
            tokens = np.argmax(step_scores, axis=-1)
        logp = processors.log_softmax(step_scores)[np.arange(tokens.shape[0]), tokens]
        scores += logp
        history = np.concatenate([history, tokens[:, None]], axis=1)
        if attention is not None:
            for r, src in enumerate(alive):
                attn_hist[src].append(np.array(attention[r], np.float32))
        done = (tokens == eos) | (t + 1 >= options.max_length)
        for r, src in enumerate(alive):
            token = StepToken(int(src), int(tokens[r]), float(logp[r]), t, bool(done[r]))
            if on_token is not None and on_token(token) is True:  # the callback asks to stop this source
                done[r] = token.is_last = True
            yield token
        if done.any():
            for r in np.flatnonzero(done):
                src = alive[r]
                ids = history[r, 1:].tolist()
                if ids and ids[-1] == eos:
                    ids.pop()
                results[src] = GenerationResult(
                    [ids], [float(scores[r])],
                    [np.stack(attn_hist[src])] if attention is not None else None,
                )
            keep = np.flatnonzero(~done)
            if keep.size == 0:
                break
            state.reorder(keep)
            alive, history, scores = alive[keep], history[keep], scores[keep]
    return results
