"""Beam search on the GPU, with the semantics of :func:`seqjit.decoding.beam.beam_search`.

Every source's ``K`` beams are rows of the device state. Per step, on the device: log-softmax of the
logits, the score processors, the ``2K`` best continuations of each source
(:func:`~seqjit.kernels.beam.cuda.beam_topk`), the bookkeeping of running beams and finished
hypotheses (:func:`~seqjit.kernels.beam.cuda.beam_advance`: token histories, scores, the next step's
tokens and the rows each new beam comes from), and the state reorder by those rows
(:meth:`~seqjit.gpu.state.DeviceDecoderState.reorder`). The host reads back one status value per
source (still improvable, every candidate ended) to decide when to stop. A source that can no longer
improve is frozen (its rows still run, their results are ignored) instead of leaving the batch.
Finished hypotheses come back once, at the end.
"""
from __future__ import annotations

import numpy as np

from seqjit.decoding.beam import _results
from seqjit.errors import NothingGenerable
from seqjit.kernels import _cuda
from seqjit.kernels.beam import cuda as bk
from seqjit.kernels.decode_step import cuda as dk
from seqjit.kernels.layout import cuda as layout
from seqjit.kernels.softmax.cuda import log_softmax

MAX_BEAM = bk.MAX_K


def beam_search(model, state, options, suppressed: tuple, prefix=None):
    """Results for every source row of a fresh device ``state`` (see the module docstring).
    ``prefix``: each source's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`, holding
    no end token: :func:`seqjit.gpu.generate.supports`), or None: every beam of a source forced on
    the device (:func:`~seqjit.kernels.decode_step.cuda.force_prefix`), last among the processors."""
    runtime = model.device_runtime
    n_src, K, eos, max_len = state.batch, options.beam_size, model.eos_id, options.max_length
    lp = float(options.length_penalty)
    state.reorder(np.repeat(np.arange(n_src), K))  # the K beams of each source (the one upload of ids)
    R = n_src * K
    width = 0 if prefix is None else prefix.shape[1]
    dev_prefix = None if prefix is None else _cuda.to_device(np.ascontiguousarray(np.repeat(prefix, K, axis=0)))
    sup = runtime.suppressed(suppressed)
    tokens = layout.fill(_cuda.device_empty((R,), np.int64), model.decoder_start_id)
    run = [layout.zeros((n_src, K, max_len), np.int64) for _ in range(2)]
    fin = [layout.zeros((n_src, K, max_len), np.int64) for _ in range(2)]
    run_scores = layout.fill(_cuda.device_empty((n_src, K), np.float32), bk.NEG)
    layout.fill(run_scores[:, 0:1], 0.0)
    fin_len = layout.zeros((n_src, K), np.int64)
    fin_scores = layout.fill(_cuda.device_empty((n_src, K), np.float32), bk.NEG)
    fin_done = layout.zeros((n_src, K), np.int32)
    active = layout.fill(_cuda.device_empty((n_src,), np.int32), 1)
    status = _cuda.device_empty((n_src,), np.int64)
    src_rows = _cuda.device_empty((R,), np.int64)
    cand_scores = _cuda.device_empty((n_src, 2 * K), np.float32)
    cand_index = _cuda.device_empty((n_src, 2 * K), np.int64)
    logp = None
    host_active = np.ones(n_src, bool)
    cur = 0
    for t in range(max_len):
        logits, _ = runtime.run_step(model, state, tokens)
        if logp is None:
            logp = _cuda.device_empty(tuple(logits.shape), np.float32)
        log_softmax(logits, out=logp)
        history = _cuda.reshape_view(run[cur], (R, max_len))
        if options.repetition_penalty != 1.0:
            dk.repetition_penalty(logp, model.decoder_start_id, history, t, options.repetition_penalty)
        if options.no_repeat_ngram_size > 0:
            dk.no_repeat_ngram(logp, model.decoder_start_id, history, t, options.no_repeat_ngram_size)
        dk.ban_tokens(logp, sup, eos if t < options.min_length else -1)
        if t < width:
            dk.force_prefix(logp, dev_prefix, t)
        bk.beam_topk(logp, run_scores, active, 2 * K, cand_scores, cand_index)
        bk.beam_advance(cand_scores, cand_index, logp.shape[1], t, max_len, eos, np.float32((t + 1) ** lp),
                        run[cur], run[1 - cur], run_scores, fin[cur], fin[1 - cur], fin_len, fin_scores, fin_done,
                        active, status, src_rows, tokens)
        cur = 1 - cur
        flags = status.copy_to_host()[host_active]  # the step's one transfer: a status per source
        improvable = (flags & 1) != 0
        if t + 1 >= max_len or ((flags & 2) != 0).all() or not improvable.any():
            break
        host_active[np.flatnonzero(host_active)[~improvable]] = False
        state.reorder(src_rows, encoder=False)  # rows move among the beams of one source
    lengths = fin_len.copy_to_host()
    empty = (lengths == 0).all(axis=1)  # no finished hypothesis: every continuation was -inf
    if empty.any():
        raise NothingGenerable.at(t, int(np.flatnonzero(empty)[0]))
    return _results(fin[cur].copy_to_host(), lengths, fin_scores.copy_to_host(), None, eos, options.num_hypotheses)
