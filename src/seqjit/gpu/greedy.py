"""Greedy search and sampling on the GPU: logits, token choice and bookkeeping stay on the device.

Per step: the step plan runs on the device tokens of the previous step; the score processors that
are on (repetition penalty, no-repeat n-grams) update a device copy of the logits, which also gets
the suppressed ids and (before ``min_length``) the end token banned when scores are asked for or
sampling; the greedy token of every row is picked on the device
(:func:`~seqjit.kernels.decode_step.cuda.greedy_argmax`, written into the next step's input), or drawn
there (:func:`~seqjit.kernels.sampling.cuda.sample_rows`: temperature, top-k, top-p, at the draws of
the CPU samplers' Philox stream of (seed, source row, step), so seeded sampled ids are the CPU's up to
float rounding); :func:`~seqjit.kernels.decode_step.cuda.greedy_advance` records it
(and adds its log-probability to the row's score). Then the ``B`` ids come to the host, the one
transfer of a step: the host keeps each row's ids and stops when every row has ended. Finished rows
stay in the batch (their steps are wasted, not wrong: rows never interact), so the plan and the
state keep their shapes. Scores come back once, at the end; attention, when asked, every step.
"""
from __future__ import annotations

import numpy as np

from seqjit.decoding import prefix as prefixes
from seqjit.decoding.results import GenerationResult
from seqjit.errors import NothingGenerable
from seqjit.kernels import _cuda
from seqjit.kernels.decode_step import cuda as dk
from seqjit.kernels.layout import cuda as layout
from seqjit.kernels.sampling import cuda as sampling
from seqjit.kernels.sampling import philox


def greedy_search(model, state, options, suppressed: tuple, sources=None, prefix=None):
    """Results for every row of a fresh device ``state`` (see the module docstring); ``sources``: each
    row's index in the caller's batch (what sampling draws are keyed by; default the row itself);
    ``prefix``: each row's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`, or None),
    uploaded once and forced last among the processors at the steps it covers
    (:func:`~seqjit.kernels.decode_step.cuda.force_prefix`), its end tokens not ending a row."""
    runtime = model.device_runtime
    batch, eos, max_len = state.batch, model.eos_id, options.max_length
    want_scores, want_attn = options.return_scores, options.return_attention
    processed = options.repetition_penalty != 1.0 or options.no_repeat_ngram_size > 0 or options.sampling
    if options.sampling:
        seed = philox.fresh_seed() if options.seed is None else philox.check_seed(options.seed)
        rows = np.arange(batch, dtype=np.int64) if sources is None else np.asarray(sources, np.int64)
        if rows.shape != (batch,):
            raise ValueError(f"sources must have one index per row ({batch}), got shape {list(rows.shape)}")
        dev_sources = _cuda.to_device(np.ascontiguousarray(rows))
    sup = runtime.suppressed(suppressed)
    plen = prefixes.lengths(prefix, batch)
    dev_prefix = None if prefix is None else _cuda.to_device(np.ascontiguousarray(prefix, np.int64))
    width = 0 if prefix is None else prefix.shape[1]
    tokens = layout.fill(_cuda.device_empty((batch,), np.int64), model.decoder_start_id)
    history = _cuda.device_empty((batch, max_len), np.int64)
    done = layout.zeros((batch,), np.int32)
    total = layout.zeros((batch,), np.float64) if want_scores else None
    scratch = None
    ids: list = [[] for _ in range(batch)]
    attn: list = [[] for _ in range(batch)]
    finished = np.zeros(batch, bool)
    for t in range(max_len):
        logits, attention = runtime.run_step(model, state, tokens, want_attn)
        ban = eos if t < options.min_length else -1
        scores = logits
        forcing = t < width
        if processed or want_scores or forcing:
            if scratch is None:
                scratch = _cuda.device_empty(tuple(logits.shape), logits.dtype)
            scores = layout.copy(logits, scratch)
            if options.repetition_penalty != 1.0:
                dk.repetition_penalty(scores, model.decoder_start_id, history, t, options.repetition_penalty)
            if options.no_repeat_ngram_size > 0:
                dk.no_repeat_ngram(scores, model.decoder_start_id, history, t, options.no_repeat_ngram_size)
            dk.ban_tokens(scores, sup, ban)
            if forcing:
                dk.force_prefix(scores, dev_prefix, t)
            if options.sampling:
                sampling.sample_rows(scores, temperature=options.sampling_temperature, topk=options.sampling_topk,
                                     topp=options.sampling_topp, seed=seed, sources=dev_sources, step=t,
                                     out=tokens)
            else:
                dk.greedy_argmax(scores, suppressed=runtime.suppressed(()), out=tokens)
        else:
            dk.greedy_argmax(logits, suppressed=sup, eos_id=eos if ban >= 0 else -1, step=0,
                             min_length=1 if ban >= 0 else 0, out=tokens)
        dk.greedy_advance(scores, tokens, eos, t, done, history, total)
        if forcing:
            dk.prefix_running(done, dev_prefix, t)
        step_ids = tokens.copy_to_host()  # the step's one transfer: B ids
        free = ~finished & (t >= plen)  # a forced row has its token whatever the bans
        _check_some_left(step_ids, free, scores, suppressed, eos if ban >= 0 else None, t, options.sampling)
        step_attn = attention.copy_to_host() if want_attn else None
        for r in np.flatnonzero(~finished):
            ids[r].append(int(step_ids[r]))
            if want_attn:
                attn[r].append(step_attn[r])
            if (step_ids[r] == eos and t >= plen[r]) or t + 1 >= max_len:
                finished[r] = True
        if finished.all():
            break
    scores_host = total.copy_to_host() if want_scores else None
    results = []
    for r in range(batch):
        row = ids[r][:-1] if len(ids[r]) > plen[r] and ids[r][-1] == eos else ids[r]
        results.append(GenerationResult([row], [float(scores_host[r])] if want_scores else None,
                                        [np.stack(attn[r]).astype(np.float32)] if want_attn else None))
    return results


def _check_some_left(step_ids, live, scores, suppressed: tuple, eos_banned, t: int, sampling: bool) -> None:
    """:class:`~seqjit.errors.NothingGenerable` for the first live row whose scores were -inf for every
    token at step ``t``. The device choosers then return a token anyway (greedy: the first, 0;
    sampling: the last), so a chosen token that the step bans shows it at no cost; where the fallback
    token is not banned, that row's scores (``scores``: the processed ones, or the logits whose bans
    the argmax applied itself) come to the host to be looked at."""
    banned = np.array(list(suppressed) + ([eos_banned] if eos_banned is not None else []), np.int64)
    fallback = scores.shape[1] - 1 if sampling else 0
    rows = np.flatnonzero(live)
    dead = rows[np.isin(step_ids[rows], banned)]
    if dead.size:
        raise NothingGenerable.at(t, int(dead[0]))
    for r in rows[step_ids[rows] == fallback]:
        row = np.array(scores[int(r)].copy_to_host(), np.float32)
        row[banned] = -np.inf
        if np.isneginf(row).all():
            raise NothingGenerable.at(t, int(r))
