"""Greedy decoding and sampling: the token choosers of the decode loop (argmax, the Philox sampler),
one hypothesis per source; finished rows leave the batch."""
from __future__ import annotations

import numpy as np

from seqjit.kernels.sampling import philox

from . import prefix as prefixes
from . import processors
from .loop import decode_loop
from .results import GenerationResult


def supports(request) -> str | None:
    """The Python loops' declaration (:func:`greedy_search`, :func:`seqjit.decoding.beam.beam_search`):
    they decode every option, on every model (the specification the other paths are tested against)."""
    return None


def greedy_search(model, state, options, *, suppressed=(), on_token=None, stream=True, need_scores=True,
                  sources=None, prefix=None):
    """Decode every row of ``state`` (a fresh DecoderState) greedily or by sampling: the decode loop
    (:func:`~seqjit.decoding.loop.decode_loop`) with a :class:`TokenChooser`.

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

    ``prefix``: each row's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`), or None.
    """
    chooser = TokenChooser(model, state.batch, options, suppressed, need_scores, sources, prefix)
    return decode_loop(model, state, options, chooser, suppressed=suppressed, on_token=on_token, stream=stream)


class Argmax:
    """The greedy chooser's pick: the best token of each row."""

    def __call__(self, scores, rows, t):
        return np.argmax(scores, axis=-1)


class Sampler:
    """The sampling pick (:func:`~seqjit.decoding.processors.sample`): row r's token at step t drawn
    with the Philox uniform of (seed, the caller's index of r's source, t)."""

    def __init__(self, options, sources):
        self.options = options
        self.seed = philox.fresh_seed() if options.seed is None else philox.check_seed(options.seed)
        self.sources = sources

    def __call__(self, scores, rows, t):
        return processors.sample(scores, self.options, philox.uniforms(self.seed, self.sources[rows], t))


class TokenChooser:
    """One hypothesis per source (greedy search or sampling); finished rows leave the batch. The
    decode loop's chooser (see :mod:`seqjit.decoding.loop` for the protocol)."""

    def __init__(self, model, batch: int, options, suppressed, need_scores: bool, sources=None, prefix=None):
        self.options, self.suppressed, self.need_scores = options, suppressed, need_scores
        self.ends = options.end_ids(model.eos_id)
        self.eos = self.ends[0] if len(self.ends) == 1 else list(self.ends)
        if options.sampling:
            sources = np.arange(batch, dtype=np.int64) if sources is None else np.asarray(sources, np.int64)
            if sources.shape != (batch,):
                raise ValueError(f"sources must have one index per row ({batch}), got shape {list(sources.shape)}")
            self.pick = Sampler(options, sources)
        else:
            self.pick = Argmax()
        self.alive = np.arange(batch)                       # source index of each live row
        self._history = np.full((batch, 1), model.decoder_start_id, np.int64)
        self.scores = np.zeros(batch, np.float64)
        self.attention = [[] for _ in range(batch)]
        self._results: list = [None] * batch
        self.fast = not need_scores and not options.sampling and options.repetition_penalty == 1.0 \
            and options.no_repeat_ngram_size == 0 and not options.forces_tokens and not options.step_rules \
            and prefix is None
        self._tokens = None
        self._prefix = prefix                                # each live row's target_prefix, or None
        self._prefix_len = prefixes.lengths(prefix, batch)

    def start(self, state) -> None:
        pass

    def history(self) -> np.ndarray:
        return self._history

    def prefixes(self):
        return self._prefix

    def prepare(self, logits, t):
        self._tokens = _plain_argmax(logits, t, self.options, self.eos, self.suppressed) if self.fast else None
        if self._tokens is not None:
            return None
        return np.array(logits, dtype=np.float32, copy=True)

    def choose(self, scores, t, attention):
        tokens = self._tokens
        if tokens is None:
            processors.check_some_left(scores, t)
            tokens = self.pick(scores, self.alive, t)
        logp = None
        if self.need_scores:
            logp = processors.token_log_probs(scores, tokens)
            self.scores += logp
        self._history = np.concatenate([self._history, tokens[:, None]], axis=1)
        if attention is not None:
            for r, src in enumerate(self.alive):
                self.attention[src].append(np.array(attention[r], np.float32))
        done = (np.isin(tokens, self.ends) & (t >= self._prefix_len)) | (t + 1 >= self.options.max_length)
        return self.alive, tokens, logp, done

    def advance(self, done, t):
        if not done.any():
            return None, True
        for r in np.flatnonzero(done):
            src = self.alive[r]
            ids = self._history[r, 1:].tolist()
            if len(ids) > self._prefix_len[r] and ids[-1] in self.ends and not self.options.return_end_token:
                ids.pop()
            self._results[src] = GenerationResult(
                [ids], [float(self.scores[r])] if self.need_scores else None,
                [np.stack(self.attention[src])] if self.options.return_attention else None)
        keep = np.flatnonzero(~done)
        if keep.size == 0:
            return None
        self.alive, self._history, self.scores = self.alive[keep], self._history[keep], self.scores[keep]
        self._prefix_len = self._prefix_len[keep]
        if self._prefix is not None:
            self._prefix = self._prefix[keep]
        return keep, True

    def results(self) -> list:
        return self._results


def _plain_argmax(logits, t, options, eos, suppressed):
    """The greedy tokens straight from float32 ``logits`` (no copy), or None when a row's best
    token is one this step forbids (the caller then runs the score processors)."""
    if logits.dtype != np.float32:
        return None
    tokens = np.argmax(logits, axis=-1)
    best = logits[np.arange(tokens.shape[0]), tokens]
    if np.isnan(best).any() or np.isneginf(best).any():  # argmax stops at a NaN; a row of only -inf
        return None  # the score processors refuse the step
    banned = list(suppressed) + ((eos if isinstance(eos, list) else [eos]) if t < options.min_length else [])
    if banned and np.isin(tokens, banned).any():
        return None
    return tokens
