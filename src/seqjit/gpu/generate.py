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
from seqjit.decoding.inputs import (check_vocab, drain, finished, pad_sources, parse_options, resolve_rules,
                                    suppressed_tokens, with_seed)
from seqjit.decoding.limits import check_max_length
from seqjit.kernels.sampling.cuda import SAMPLE_MAX_K

from .beam import MAX_BEAM, beam_search
from .greedy import greedy_search


def on_device(opts, callback, vocab: int) -> bool:
    """Whether the device loops decode ``opts`` (else the CPU loops run on the device model)."""
    if callback is not None or opts.forces_tokens or opts.step_rules:  # the CPU loops' processors
        return False
    if opts.sampling:
        k = opts.sampling_topk if 0 < opts.sampling_topk < vocab else 0
        return k <= SAMPLE_MAX_K and (opts.sampling_topp >= 1.0 or k > 0)
    if opts.beam_size > 1:
        return opts.beam_size <= MAX_BEAM and not opts.return_attention
    return True


def generate(model, sources, *, lengths=None, max_batch_size: int = 64, callback=None, **options) -> list:
    """:func:`seqjit.decoding.generate` on the GPU; the same arguments and results."""
    opts = resolve_rules(model, parse_options(options))
    if not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool) or max_batch_size < 1:
        raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
    if callback is not None and opts.beam_size > 1:
        raise ValueError("callback is only supported with beam_size=1 (greedy or sampling)")
    ids, lens = pad_sources(sources, model.pad_id, lengths)
    check_vocab(model, ids, lens)
    opts = with_seed(check_max_length(model, opts, explicit="max_length" in options,
                                           rows=min(max_batch_size, ids.shape[0]) * opts.beam_size,
                                           source_length=ids.shape[1]))
    suppressed = suppressed_tokens(model, opts)
    order = np.argsort(-lens, kind="stable")
    results: list = [None] * ids.shape[0]
    for start in range(0, order.shape[0], max_batch_size):
        rows = order[start:start + max_batch_size]
        width = max(1, int(lens[rows].max()))
        state = model.start(ids[rows, :width], lens[rows], max_length=opts.max_length)
        try:
            batch_results = _decode(model, state, opts, suppressed, callback, rows)
        finally:
            state.close()
        for i, res in zip(rows, batch_results):
            results[i] = finished(res, opts, lens[i])
    return results


def _decode(model, state, opts, suppressed, callback, sources) -> list:
    if on_device(opts, callback, model.target_vocab_size or 0):
        if opts.beam_size > 1:
            return beam_search(model, state, opts, suppressed)
        return greedy_search(model, state, opts, suppressed, sources)
    if opts.beam_size > 1:
        return host_beam_search(model, state, opts, suppressed=suppressed)
    return drain(host_greedy_search(model, state, opts, suppressed=suppressed, on_token=callback,
                                         stream=callback is not None,
                                         need_scores=opts.return_scores or callback is not None, sources=sources))
