"""The decoder-step contract as data: the value names every architecture's graphs use, the per-decode
:class:`DecoderState`, and the checks of source ids. A leaf: it imports nothing of seqjit, so the
decoding loops and the GPU runtime read the contract without importing the models
(:mod:`seqjit.models.base` describes the graphs and implements the contract).
"""
from __future__ import annotations

import numpy as np

#: names fixed by the contract
SRC_IDS, SRC_LENGTHS, MEMORY = "src_ids", "src_lengths", "memory"
PREV_TOKENS, STEP, LOGITS, ATTENTION = "prev_tokens", "step", "logits", "attention"
NEXT = "next."


class _DefaultMaxLength(int):
    """The ``max_length`` of a ``generate`` call that gave none: 256, lowered to the model's positions
    when it has fewer (an explicit value above them is an error). A distinct object, so that
    ``generate`` can tell it from an explicit 256."""

    def __repr__(self) -> str:
        return "DEFAULT_MAX_LENGTH"


#: ``generate``'s default ``max_length`` (see :class:`_DefaultMaxLength`); equal to
#: ``DecodingOptions.max_length``
DEFAULT_MAX_LENGTH = _DefaultMaxLength(256)


def declares(model, capability: str) -> bool:
    """Whether ``model`` declares ``capability``, one of :class:`~seqjit.models.base.Seq2SeqModel`'s
    capability classmethods (``native_step``, ``native_decode``); a model without it (a stand-in that
    only follows the contract) declares none, and is decoded by the Python loops."""
    check = getattr(type(model), capability, None)
    return bool(check()) if callable(check) else False


class DecoderState:
    """Per-decode state: encoder state (read-only), decoder state (advanced by every step), the
    source lengths, the next step's position and the cache capacity ``max_length``."""

    def __init__(self, encoder: dict, decoder: dict, src_lengths: np.ndarray, max_length: int,
                 time_axes: dict | None = None):
        self.encoder, self.decoder = encoder, decoder
        self.src_lengths = src_lengths
        self.max_length = int(max_length)
        self.step = 0
        #: decoder state name -> axis along which only the first ``step`` entries are in use (a KV
        #: cache's time axis); reordering copies just that prefix
        self.time_axes = dict(time_axes or {})
        #: step graph name -> (executor, plan, batch): the plans this decode holds (its own buffers)
        self.leases: dict = {}

    def close(self) -> None:
        """Give the step plans this state holds back to their executors (for other decodes)."""
        leases, self.leases = self.leases, {}
        for ex, plan, _ in leases.values():
            ex.release(plan)

    @property
    def batch(self) -> int:
        return int(self.src_lengths.shape[0])

    def reorder(self, indices, *, encoder: bool = True) -> None:
        """Keep rows ``indices`` (int array [B']) of every state array, in that order: beam
        reordering, or expanding each source to k beams with ``np.repeat(np.arange(B), k)``.

        When the batch size stays the same, only the rows that change are copied, in place (the
        arrays, and so the decoder plan, stay the same). ``encoder=False`` leaves the encoder state
        alone when the batch size stays the same: right when rows only move among the beams of one
        source, whose encoder rows are identical."""
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise TypeError(f"indices must be a 1-D integer array, got {idx.dtype} with shape {list(idx.shape)}")
        if idx.size and (idx.min() < 0 or idx.max() >= self.batch):
            raise ValueError(f"indices must lie in [0, {self.batch}), got values from {idx.min()} to {idx.max()}")
        same = idx.shape[0] == self.batch
        if same:
            moved = np.flatnonzero(idx != np.arange(idx.shape[0]))
            if moved.size == 0:
                return
            sources = idx[moved]
            for arr in self.decoder.values():
                arr[moved] = arr[sources]  # the right side is gathered first: cycles are safe
            if encoder:
                for arr in self.encoder.values():
                    arr[moved] = arr[sources]
                self.src_lengths[moved] = self.src_lengths[sources]
            return
        for name, arr in self.decoder.items():
            self.decoder[name] = np.ascontiguousarray(arr[idx])
        self.encoder = {name: np.ascontiguousarray(arr[idx]) for name, arr in self.encoder.items()}
        self.src_lengths = np.ascontiguousarray(self.src_lengths[idx])


def check_ids(name: str, ids) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise ValueError(f"{name} must have shape [B, L] with L >= 1, got {list(ids.shape)}")
    return np.ascontiguousarray(ids, dtype=np.int64)


def check_source(src_ids, src_lengths):
    """``src_ids`` as int64 [B, S] and ``src_lengths`` as int64 [B] in [0, S] (default: all S)."""
    src_ids = check_ids("src_ids", src_ids)
    batch, length = src_ids.shape
    if src_lengths is None:
        return src_ids, np.full(batch, length, np.int64)
    lengths = np.asarray(src_lengths)
    if lengths.dtype.kind not in "iu":
        raise TypeError(f"src_lengths must hold integers, got dtype {lengths.dtype}")
    if lengths.shape != (batch,):
        raise ValueError(f"src_lengths must have shape [{batch}] (one per src_ids row), got {list(lengths.shape)}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > length):
        raise ValueError(f"src_lengths must lie in [0, {length}], got values from {lengths.min()} to {lengths.max()}")
    return src_ids, np.ascontiguousarray(lengths, dtype=np.int64)
