"""``generate`` for a model on the GPU (``model.to("cuda")``): :func:`seqjit.decoding.generate` sends
such a model here.

Sources are checked, sorted by length and batched as on the CPU (results equal decoding each source
alone). Greedy search, sampling and beam search run on the device (:mod:`seqjit.gpu.greedy`,
:mod:`seqjit.gpu.beam`): only the source ids go up, and only token ids (and scores / attention when
asked) come back. What the device loops do not cover runs the CPU decoding loops on the device
model, whose ``step`` then brings each step's logits to the host: a ``callback``, beam search with
``return_attention``, beams wider than :data:`~seqjit.gpu.beam.MAX_BEAM`, a forced token, a ``target_prefix`` holding the end token in beam search (the device loops force
the others), and sampling with a top-k
above :data:`~seqjit.kernels.sampling.cuda.SAMPLE_MAX_K` or top-p without a top-k filter.
"""
from __future__ import annotations

from seqjit.decoding.batch import SourceBatch
from seqjit.decoding.group_beam import python_beam_search
from seqjit.decoding.greedy import greedy_search as host_greedy_search
from seqjit.decoding.inputs import check_batching, drain, finished, parse_options, resolve_rules
from seqjit.decoding.prefix import checked_prefix
from seqjit.decoding.spec import decode_spec
from seqjit.decoding.strategy import DEVICE, choose
from seqjit.kernels.sampling.cuda import SAMPLE_MAX_K

from .beam import MAX_BEAM, beam_search
from .greedy import greedy_search


def supports(opts, callback, vocab: int, eos: int = -1) -> str | None:
    """The device loops' declaration: what in ``opts`` they do not decode (then the CPU loops run on
    the device model), in words; None when they decode it all. The device runtime's ``supports``,
    which :func:`seqjit.decoding.strategy.choose` reads."""
    if callback is not None:
        return "a per-token callback"
    if opts.end_token is not None or opts.return_end_token:
        return "end_token or return_end_token"
    if opts.forces_tokens:
        return "a forced token"
    if opts.prefixed and opts.beam_size > 1 and any(eos in p for p in opts.target_prefix):
        return "a target_prefix holding the end token in beam search (the device beam step would end there)"
    if opts.step_rules:
        return "a step-dependent suppression rule"
    if opts.sampling:
        k = opts.sampling_topk if 0 < opts.sampling_topk < vocab else 0
        if k > SAMPLE_MAX_K:
            return f"sampling with a top-k above {SAMPLE_MAX_K}"
        if opts.sampling_topp < 1.0 and k == 0:
            return "top-p sampling without a top-k filter"
        return None
    if opts.num_beam_groups > 1:
        return "group (diverse) beam search (num_beam_groups > 1)"
    if opts.beam_size > MAX_BEAM:
        return f"beams wider than {MAX_BEAM}"
    if opts.beam_size > 1 and opts.return_attention:
        return "beam search with return_attention"
    return None


def generate(model, sources, *, lengths=None, max_batch_size: int = 64, callback=None, **options) -> list:
    """:func:`seqjit.decoding.generate` on the GPU; the same arguments and results."""
    opts = resolve_rules(model, parse_options(options))
    check_batching(max_batch_size, callback, opts)
    if opts.return_alternatives:
        raise ValueError("return_alternatives is not supported on a device yet (decode on the CPU)")
    batch = SourceBatch.of(model, sources, lengths).limited(opts)
    spec = decode_spec(model, opts, explicit="max_length" in options,
                       rows=min(max_batch_size, len(batch)) * opts.beam_size, width=batch.ids.shape[1])
    spec = checked_prefix(model, spec, len(batch))
    batch = batch.with_prefix(spec)
    on_device = choose(model, spec, rows=len(batch), max_batch_size=max_batch_size, callback=callback).path == DEVICE
    results: list = [None] * len(batch)
    for part in batch.batches(max_batch_size):
        state = model.start_checked(part.ids, part.lengths, max_length=spec.max_length)
        try:
            batch_results = _decode(model, state, spec, spec.suppressed, callback, part.index, on_device, part.prefix)
        finally:
            state.close()
        for k, (i, length, res) in enumerate(zip(part.index.tolist(), part.lengths, batch_results)):
            results[i] = finished(res, spec, length)
            res.truncated = bool(part.truncated is not None and part.truncated[k])
    return results


def _decode(model, state, opts, suppressed, callback, sources, on_device: bool, prefix=None) -> list:
    if on_device:
        if opts.beam_size > 1:
            return beam_search(model, state, opts, suppressed, prefix)
        return greedy_search(model, state, opts, suppressed, sources, prefix)
    if opts.beam_size > 1:
        return python_beam_search(model, state, opts, suppressed=suppressed, prefix=prefix)
    return drain(host_greedy_search(model, state, opts, suppressed=suppressed, on_token=callback,
                                         stream=callback is not None,
                                         need_scores=opts.return_scores or callback is not None, sources=sources,
                                         prefix=prefix))
