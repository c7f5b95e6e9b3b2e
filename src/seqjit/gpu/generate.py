"""``generate`` for a model on the GPU (``model.to("cuda")``): :func:`seqjit.decoding.generate` sends
such a model here.

Sources are checked, sorted by length and batched as on the CPU (results equal decoding each source
alone). Greedy search, sampling and beam search run on the device (:mod:`seqjit.gpu.greedy`,
:mod:`seqjit.gpu.beam`): only the source ids go up, and only token ids (and scores / attention when
asked) come back. What the device loops do not cover runs the CPU decoding loops on the device
model, whose ``step`` then brings each step's logits to the host: a ``callback``, beam search with
``return_attention``, beams wider than :data:`~seqjit.gpu.beam.MAX_BEAM`, a forced token, and sampling with a top-k
above :data:`~seqjit.kernels.sampling.cuda.SAMPLE_MAX_K` or top-p without a top-k filter.
"""
from __future__ import annotations

import numpy as np

from seqjit.decoding.beam import beam_search as host_beam_search
from seqjit.decoding.greedy import greedy_search as host_greedy_search
from seqjit.decoding.inputs import (check_batching, check_vocab, drain, finished, pad_sources, parse_options,
                                    resolve_rules, suppressed_tokens, with_seed)
from seqjit.decoding.limits import check_max_length
from seqjit.decoding.strategy import DEVICE, choose
from seqjit.kernels.sampling.cuda import SAMPLE_MAX_K

from .beam import MAX_BEAM, beam_search
from .greedy import greedy_search


def declines(opts, callback, vocab: int) -> str | None:
    """What in ``opts`` the device loops do not decode (then the CPU loops run on the device model),
    in words; None when they decode it all. The device runtime's ``declines``, which
    :func:`seqjit.decoding.strategy.choose` asks."""
    if callback is not None:
        return "a per-token callback"
    if opts.forces_tokens:
        return "a forced token"
    if opts.step_rules:
        return "a step-dependent suppression rule"
    if opts.sampling:
        k = opts.sampling_topk if 0 < opts.sampling_topk < vocab else 0
        if k > SAMPLE_MAX_K:
            return f"sampling with a top-k above {SAMPLE_MAX_K}"
        if opts.sampling_topp < 1.0 and k == 0:
            return "top-p sampling without a top-k filter"
        return None
    if opts.beam_size > MAX_BEAM:
        return f"beams wider than {MAX_BEAM}"
    if opts.beam_size > 1 and opts.return_attention:
        return "beam search with return_attention"
    return None


def generate(model, sources, *, lengths=None, max_batch_size: int = 64, callback=None, **options) -> list:
    """:func:`seqjit.decoding.generate` on the GPU; the same arguments and results."""
    opts = resolve_rules(model, parse_options(options))
    check_batching(max_batch_size, callback, opts)
    ids, lens = pad_sources(sources, model.source_pad_id, lengths)
    check_vocab(model, ids, lens)
    opts = with_seed(check_max_length(model, opts, explicit="max_length" in options,
                                           rows=min(max_batch_size, ids.shape[0]) * opts.beam_size,
                                           source_length=ids.shape[1]))
    suppressed = suppressed_tokens(model, opts)
    on_device = choose(model, opts, rows=ids.shape[0], max_batch_size=max_batch_size, callback=callback).path == DEVICE
    order = np.argsort(-lens, kind="stable")
    results: list = [None] * ids.shape[0]
    for start in range(0, order.shape[0], max_batch_size):
        rows = order[start:start + max_batch_size]
        width = max(1, int(lens[rows].max()))
        state = model.start_checked(ids[rows, :width], lens[rows], max_length=opts.max_length)
        try:
            batch_results = _decode(model, state, opts, suppressed, callback, rows, on_device)
        finally:
            state.close()
        for i, res in zip(rows, batch_results):
            results[i] = finished(res, opts, lens[i])
    return results


def _decode(model, state, opts, suppressed, callback, sources, on_device: bool) -> list:
    if on_device:
        if opts.beam_size > 1:
            return beam_search(model, state, opts, suppressed)
        return greedy_search(model, state, opts, suppressed, sources)
    if opts.beam_size > 1:
        return host_beam_search(model, state, opts, suppressed=suppressed)
    return drain(host_greedy_search(model, state, opts, suppressed=suppressed, on_token=callback,
                                         stream=callback is not None,
                                         need_scores=opts.return_scores or callback is not None, sources=sources))
