"""``model.score(sources, targets)``: the log-probability of given targets, teacher-forced
(CTranslate2's ``Translator.score_batch``).

Each target is scored as the decoder reads it: the decoder input is the model's decoder start
token followed by the target, and the scored tokens are the target followed by the end token, so
a target of n tokens gets n + 1 log-probabilities (the start token is not scored; an empty target
scores only the end token). Every log-probability is taken over the whole target vocabulary, from
the model's raw logits (no decoding rule applies: no suppressed tokens, no forced tokens).

The batch runs natively: sorted by length, cut into batches of at most ``max_batch_size`` rows
(fewer where the batch's logits would pass :data:`LOGITS_BUDGET` bytes; a target too long for that
alone is stepped, holding one position's logits), each encoded once and
decoded in one pass of the full-sequence decoder graph (``decoder_full``: causal self-attention
over the whole target) where the architecture has one, else step by step with the given tokens as
the previous tokens (the lowered step program run once per position, as the native greedy loop
runs it; ``model.step`` where the plan does not lower or on a device). Targets are padded after
their length; the decoder is causal, so the padding never changes the scored positions.
"""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from seqjit.errors import NonFiniteLogits
from seqjit.graph.lowering import Unsupported
from seqjit.kernels._threads import get_num_threads
from seqjit.models.contract import LOGITS, NEXT, PREV_TOKENS, STEP, declares

from .inputs import check_vocab, pad_sources
from .limits import target_positions

__all__ = ["ScoringResult", "score", "LOGITS_BUDGET"]

#: the most bytes of logits ([rows, target length, vocabulary] float32) one batch's decoder pass
#: holds; a batch whose logits would hold more is split into fewer rows
LOGITS_BUDGET = 256 << 20


@dataclasses.dataclass
class ScoringResult:
    """One source's scored target: ``ids`` the scored tokens (the target, then the end token),
    ``log_probs`` their log-probabilities (float32 values, one per id) and ``score`` their sum."""

    ids: list
    log_probs: list
    score: float

    @property
    def normalized_score(self) -> float:
        """``score`` divided by the number of scored tokens (CTranslate2's ``normalized_score``)."""
        return self.score / max(1, len(self.log_probs))


def score(model, sources, targets, *, max_batch_size: int = 64) -> list:
    """One :class:`ScoringResult` per source, in order: the log-probabilities of ``targets[i]``
    (a token-id sequence, possibly empty) given ``sources[i]``; see the module docstring.

    ValueError or TypeError, naming the argument and the index, for: sources and targets of different
    counts, a source or target that is not a flat sequence of integer ids, an empty source, an id
    outside the source or target vocabulary, a source or target longer than the model's positions.
    """
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, numbers.Integral) or max_batch_size < 1:
        raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
    ids, lens = pad_sources(sources, model.source_pad_id)
    tgt_rows = _check_targets(model, targets, ids.shape[0])
    _check_sources(model, ids, lens)
    tgt_lens = np.array([t.shape[0] for t in tgt_rows], np.int64)
    order = np.argsort(-(lens + tgt_lens), kind="stable")
    vocab = int(model.target_vocab_size or 1)
    results: list = [None] * ids.shape[0]
    start = 0
    while start < order.shape[0]:
        rows = order[start:start + max_batch_size]
        steps = int(tgt_lens[rows].max()) + 1
        fit = max(1, LOGITS_BUDGET // (steps * vocab * 4))
        rows = rows[:fit]
        start += rows.shape[0]
        for i, res in zip(rows, _score_rows(model, ids, lens, tgt_rows, rows)):
            results[i] = res
    return results


def _check_targets(model, targets, count: int) -> list:
    """``targets`` as int64 rows, one per source; TypeError / ValueError naming ``targets[i]``."""
    if isinstance(targets, (str, bytes)) or not hasattr(targets, "__len__"):
        raise TypeError(f"targets must be a list of token-id sequences (one per source), got {type(targets).__name__}")
    if len(targets) != count:
        raise ValueError(f"targets must hold one sequence per source: got {len(targets)} targets for {count} sources")
    vocab, positions = model.target_vocab_size, target_positions(model)
    rows = []
    for i, target in enumerate(targets):
        if isinstance(target, (str, bytes, numbers.Number)):
            raise TypeError(f"targets[{i}] must be a sequence of integer token ids, got {type(target).__name__}")
        try:
            arr = np.asarray(target)
        except ValueError:  # NumPy: "inhomogeneous shape"
            raise TypeError(f"targets[{i}] must be a flat sequence of integer token ids, got a ragged nested one") from None
        if arr.ndim != 1 or (arr.size and (arr.dtype.kind not in "iu" or arr.dtype == np.bool_)):
            raise TypeError(f"targets[{i}] must be a 1-D sequence of integer token ids, got {arr.dtype} {list(arr.shape)}")
        if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise ValueError(f"targets[{i}] holds token id {int(arr.max())}, outside the target vocabulary [0, {vocab})")
        arr = arr.astype(np.int64)
        if vocab is not None and arr.size and (arr.min() < 0 or arr.max() >= vocab):
            bad = int(arr[(arr < 0) | (arr >= vocab)][0])
            raise ValueError(f"targets[{i}] holds token id {bad}, outside the target vocabulary [0, {vocab})")
        if positions is not None and arr.shape[0] + 1 > positions:
            raise ValueError(f"targets[{i}] has {arr.shape[0]} tokens: with the start token the decoder reads "
                             f"{arr.shape[0] + 1}, more than the model's {positions} positions (max_positions)")
        rows.append(arr)
    return rows


def _check_sources(model, ids: np.ndarray, lens: np.ndarray) -> None:
    check_vocab(model, ids, lens)
    empty = np.flatnonzero(lens == 0)
    if empty.size:
        raise ValueError(f"sources[{int(empty[0])}] is empty: a target can only be scored given a source of at "
                         "least one token")
    positions = getattr(model.config, "max_positions", None) if target_positions(model) is not None else None
    if positions is not None and lens.max() > positions:
        i = int(np.flatnonzero(lens > positions)[0])
        raise ValueError(f"sources[{i}] has {int(lens[i])} tokens, more than the model's {positions} positions "
                         "(max_positions)")


def _score_rows(model, ids, lens, tgt_rows, rows) -> list:
    """The results of sources ``rows`` (one batch): the decoder inputs (start + target, padded) and
    the scored tokens (target + end), run in one decoder pass or step by step."""
    width = int(lens[rows].max())
    src = np.ascontiguousarray(ids[rows, :width])
    src_lens = np.ascontiguousarray(lens[rows])
    n = np.array([tgt_rows[i].shape[0] + 1 for i in rows], np.int64)
    steps = int(n.max())
    fill = _input_fill(model)
    tgt_in = np.full((rows.shape[0], steps), fill, np.int64)
    tgt_out = np.full((rows.shape[0], steps), fill, np.int64)
    tgt_in[:, 0] = model.decoder_start_id
    for r, i in enumerate(rows):
        t = tgt_rows[i]
        tgt_in[r, 1:t.shape[0] + 1] = t
        tgt_out[r, :t.shape[0]] = t
        tgt_out[r, t.shape[0]] = model.eos_id
    vocab = int(model.target_vocab_size or 1)
    fits = rows.shape[0] * steps * vocab * 4 <= LOGITS_BUDGET  # else one row too long for one pass: stepped
    if fits and model.has_full_decoder() and getattr(model, "device", "cpu") == "cpu":
        picked = _pick_full(model.logits(src, tgt_in, src_lens), tgt_out, n)
    else:
        picked = _pick_stepwise(model, src, src_lens, tgt_in, tgt_out)
    out = []
    for r in range(rows.shape[0]):
        log_probs = picked[r, :n[r]]
        if np.isnan(log_probs).any():
            raise NonFiniteLogits(f"scoring sources[{int(rows[r])}]: the logits of position "
                                  f"{int(np.flatnonzero(np.isnan(log_probs))[0])} hold NaN (the model's weights or "
                                  "activations overflow float32)")
        out.append(ScoringResult(ids=tgt_out[r, :n[r]].tolist(), log_probs=log_probs.tolist(),
                                 score=float(log_probs.sum(dtype=np.float64))))
    return out


def _input_fill(model) -> int:
    """The id padding the decoder inputs past a target (never read by a scored position): the pad id
    where it lies in the target vocabulary, else the start token."""
    pad, vocab = model.pad_id, model.target_vocab_size
    if pad is not None and (vocab is None or 0 <= pad < vocab):
        return int(pad)
    return int(model.decoder_start_id)


def _log_prob_of(logits: np.ndarray, tokens: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """log_softmax(logits)[k, tokens[k]] for logits [K, V] and tokens [K], as float32 (the
    normaliser summed in float64). ``overwrite``: ``logits`` is the caller's to spoil (no copies)."""
    top = logits.max(axis=1, keepdims=True)
    shifted = np.subtract(logits, top, out=logits if overwrite else None)
    chosen = shifted[np.arange(tokens.shape[0]), tokens]  # a copy: exp below may overwrite shifted
    norm = np.log(np.exp(shifted, out=shifted if overwrite else None).sum(axis=1, dtype=np.float64))
    return (chosen - norm).astype(np.float32)


#: logits bytes the log-softmax takes at a time: its passes (max, subtract, exp, sum) then stay in
#: the cache (the whole [32 x 21 x 58101] batch at once takes 2x longer than 1 MiB blocks of it)
PICK_BLOCK_BYTES = 1 << 20


def _pick_full(logits: np.ndarray, tgt_out: np.ndarray, n: np.ndarray) -> np.ndarray:
    """[B, T] log-probabilities of ``tgt_out`` from teacher-forced logits [B, T, V], in blocks of
    positions (those past a row's ``n`` too, not read: the batch is sorted by length, so they are
    few); ``logits`` (this call's own) is overwritten."""
    batch, steps, vocab = logits.shape
    flat, tokens = logits.reshape(batch * steps, vocab), tgt_out.reshape(-1)
    picked = np.empty(batch * steps, np.float32)
    block = max(1, PICK_BLOCK_BYTES // (4 * vocab))
    for k in range(0, flat.shape[0], block):
        picked[k:k + block] = _log_prob_of(flat[k:k + block], tokens[k:k + block], overwrite=True)
    return picked.reshape(batch, steps)


def _pick_stepwise(model, src, src_lens, tgt_in, tgt_out) -> np.ndarray:
    """[B, T] log-probabilities of ``tgt_out``, the decoder stepped through ``tgt_in``, the batch's
    rows together: the native step program run with the given tokens (:func:`_run_native_steps`)
    where the step plan lowers, else ``model.step`` per position."""
    steps = tgt_in.shape[1]
    picked = np.zeros(tgt_out.shape, np.float32)
    state = model.start_checked(src, src_lens, max_length=steps)
    try:
        if not _run_native_steps(model, state, tgt_in, tgt_out, picked):
            for t in range(steps):
                logits = np.asarray(model.step(state, tgt_in[:, t], copy=False))
                picked[:, t] = _log_prob_of(logits, tgt_out[:, t])
    finally:
        state.close()
    return picked


def _run_native_steps(model, state, tgt_in, tgt_out, picked) -> bool:
    """Fill ``picked`` by running the lowered step program of the fresh ``state``'s batch once per
    position, its previous-token and step inputs written in place and the recurrent state copied
    back natively (what the native greedy loop does per token, without choosing one); False, with
    nothing run, where the model steps otherwise or its plan does not lower (CPU only)."""
    if getattr(model, "device", "cpu") != "cpu" or not declares(model, "native_step"):
        return False
    feeds = model.step_feeds(state, np.ascontiguousarray(tgt_in[:, 0]))
    native = model.step_plan(state, "decoder_step", feeds).native_replay(feeds)
    if native is None:
        return False
    arrays = native.bind(feeds)
    try:
        copy_back = native.copy_back_program([(NEXT + key, key) for key in state.decoder])
    except Unsupported:
        return False
    copy_back.set_inputs(arrays)
    inputs = dict(zip(native.inputs, arrays))
    prev, step, logits = inputs[PREV_TOKENS], inputs[STEP], native.output(LOGITS)
    threads = get_num_threads()
    for t in range(tgt_in.shape[1]):
        prev[:] = tgt_in[:, t]
        step[...] = t
        native.program.run(threads)
        copy_back.run(threads)
        picked[:, t] = _log_prob_of(logits, tgt_out[:, t])
    state.step = tgt_in.shape[1]
    return True
