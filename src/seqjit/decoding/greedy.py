"""Greedy decoding and sampling: one hypothesis per source, finished rows leave the batch."""
from __future__ import annotations

import numpy as np

from seqjit.kernels.sampling import philox

from . import processors
from .results import GenerationResult, StepToken


def supports(request) -> str | None:
    """The Python loops' declaration (:func:`greedy_search`, :func:`seqjit.decoding.beam.beam_search`):
    they decode every option, on every model (the specification the other paths are tested against)."""
    return None


def greedy_search(model, state, options, *, suppressed=(), on_token=None, stream=True, need_scores=True,
                  sources=None):
    """Decode every row of ``state`` (a fresh DecoderState) greedily or by sampling.

    Yields :class:`StepToken` as tokens are produced (for streaming) and returns the list of
    :class:`GenerationResult` (one per source row) as the generator's value. ``on_token(StepToken)``
    is called for every token; when it returns True, that source stops there.

    ``stream=False`` (no callback): no StepToken is made or yielded. ``need_scores=False``: the
    log-probabilities are not computed (results carry no scores), and a plain greedy step (no
    sampling, repetition penalty or n-gram ban) takes the argmax of the logits as they are,
    without copying them, when it is not a token that the step forbids (end token before
    ``min_length``, suppressed tokens); the tokens are the same as with ``need_scores=True``.

    Sampling draws row r's token at step t with the uniform of (``options.seed``, ``sources[r]``, t)
    from :mod:`seqjit.kernels.sampling.philox`; ``sources`` [batch] is each row's index in the
    caller's batch (default: its row in ``state``), so a source samples the same tokens in any batch.
    ``options.seed`` None: a fresh 64-bit seed from the operating system for this decode.
    """
    batch = state.batch
    eos = model.eos_id
    if options.sampling:
        seed = philox.fresh_seed() if options.seed is None else philox.check_seed(options.seed)
        sources = np.arange(batch, dtype=np.int64) if sources is None else np.asarray(sources, np.int64)
        if sources.shape != (batch,):
            raise ValueError(f"sources must have one index per row ({batch}), got shape {list(sources.shape)}")
    alive = np.arange(batch)                       # source index of each live row
    history = np.full((batch, 1), model.decoder_start_id, np.int64)
    scores = np.zeros(batch, np.float64)
    attn_hist = [[] for _ in range(batch)]
    results: list = [None] * batch
    fast = not need_scores and not options.sampling and options.repetition_penalty == 1.0 \
        and options.no_repeat_ngram_size == 0 and not options.forces_tokens and not options.step_rules
    for t in range(options.max_length):
        out = model.step(state, history[:, -1], with_attention=options.return_attention, copy=False)
        logits, attention = out if options.return_attention else (out, None)
        tokens = _plain_argmax(logits, t, options, eos, suppressed) if fast else None
        if tokens is None:
            step_scores = np.array(logits, dtype=np.float32, copy=True)
            processors.process(step_scores, history, t, options, eos, suppressed)
            processors.check_some_left(step_scores, t)
            if options.sampling:
                tokens = processors.sample(step_scores, options, philox.uniforms(seed, sources[alive], t))
            else:
                tokens = np.argmax(step_scores, axis=-1)
        if need_scores:
            logp = processors.token_log_probs(step_scores, tokens)
            scores += logp
        history = np.concatenate([history, tokens[:, None]], axis=1)
        if attention is not None:
            for r, src in enumerate(alive):
                attn_hist[src].append(np.array(attention[r], np.float32))
        done = (tokens == eos) | (t + 1 >= options.max_length)
        if stream:
            for r, src in enumerate(alive):
                token = StepToken(int(src), int(tokens[r]), float(logp[r]) if need_scores else float("nan"), t, bool(done[r]))
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
                    [ids], [float(scores[r])] if need_scores else None,
                    [np.stack(attn_hist[src])] if attention is not None else None,
                )
            keep = np.flatnonzero(~done)
            if keep.size == 0:
                break
            state.reorder(keep)
            alive, history, scores = alive[keep], history[keep], scores[keep]
    return results


def _plain_argmax(logits, t, options, eos, suppressed):
    """The greedy tokens straight from float32 ``logits`` (no copy), or None when a row's best
    token is one this step forbids (the caller then runs the score processors)."""
    if logits.dtype != np.float32:
        return None
    tokens = np.argmax(logits, axis=-1)
    best = logits[np.arange(tokens.shape[0]), tokens]
    if np.isnan(best).any() or np.isneginf(best).any():  # argmax stops at a NaN; a row of only -inf
        return None  # the score processors refuse the step
    banned = list(suppressed) + ([eos] if t < options.min_length else [])
    if banned and np.isin(tokens, banned).any():
        return None
    return tokens
