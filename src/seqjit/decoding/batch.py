"""The sources of a decode as one batch object: the padded ids, each row's length and its index in
the caller's ``sources`` (what results are put back by, and what sampling draws are keyed by), and
any per-source input (its ``target_prefix``). Sorting by length, cutting into batches and splitting over threads permute
the whole object (:meth:`SourceBatch.take`), so a per-source input can never fall out of step with
its source."""
from __future__ import annotations

import dataclasses

import numpy as np

from seqjit.errors import SourceTooLong

from .inputs import check_vocab, pad_sources
from .prefix import prefix_rows


@dataclasses.dataclass(frozen=True)
class SourceBatch:
    """Rows of sources: ``ids`` int64 [B, S] (padded with the model's source pad id, S >= 1),
    ``lengths`` int64 [B], ``index`` int64 [B] (each row's position in the caller's sources),
    ``truncated`` bool [B] or None (each row cut to ``max_input_length``: :meth:`limited`),
    ``prefix`` int64 [B, P] or None (each row's ``target_prefix``, padded with -1:
    :func:`~seqjit.decoding.prefix.prefix_rows`)."""

    ids: np.ndarray
    lengths: np.ndarray
    index: np.ndarray
    truncated: np.ndarray | None = None
    prefix: np.ndarray | None = None

    @classmethod
    def of(cls, model, sources, lengths=None) -> "SourceBatch":
        """The checked batch of a call's ``sources`` (:func:`~seqjit.decoding.inputs.pad_sources`,
        :func:`~seqjit.decoding.inputs.check_vocab`), rows in the caller's order."""
        ids, lens = pad_sources(sources, model.source_pad_id, lengths)
        check_vocab(model, ids, lens)
        return cls(ids, lens, np.arange(ids.shape[0], dtype=np.int64))

    def with_prefix(self, options) -> "SourceBatch":
        """The batch (rows in the caller's order) with ``options.target_prefix`` (checked by
        :func:`~seqjit.decoding.prefix.checked_prefix`; None: none) as its rows' prefixes."""
        if options.target_prefix is None:
            return self
        return dataclasses.replace(self, prefix=prefix_rows(options.target_prefix))

    def __len__(self) -> int:
        return self.ids.shape[0]

    @property
    def width(self) -> int:
        """The longest row's length (at least 1)."""
        return max(1, int(self.lengths.max()))

    def take(self, rows: np.ndarray) -> "SourceBatch":
        """The batch of ``rows`` (positions in this batch), as wide as its longest row."""
        lengths = self.lengths[rows]
        width = max(1, int(lengths.max())) if lengths.size else 1
        return SourceBatch(self.ids[rows, :width], lengths, self.index[rows],
                           None if self.truncated is None else self.truncated[rows],
                           None if self.prefix is None else self.prefix[rows])

    def limited(self, options) -> "SourceBatch":
        """The batch under ``options.max_input_length`` (0: no limit): a longer source refused
        (:class:`~seqjit.errors.SourceTooLong`, naming the first) or, with ``truncate_input``, cut
        to its first ``max_input_length`` tokens (``truncated`` marks it)."""
        limit = options.max_input_length
        if not limit or int(self.lengths.max()) <= limit:
            return self
        over = self.lengths > limit
        if not options.truncate_input:
            i = int(np.flatnonzero(over)[0])
            raise SourceTooLong(f"sources[{int(self.index[i])}] has {int(self.lengths[i])} tokens, more than "
                                f"max_input_length {limit} (truncate_input=True cuts it instead)")
        return SourceBatch(self.ids[:, :limit], np.minimum(self.lengths, limit), self.index, over, self.prefix)

    def by_length(self) -> np.ndarray:
        """Row positions longest first (ties in order)."""
        return np.argsort(-self.lengths, kind="stable")

    def batches(self, max_batch_size: int) -> list:
        """Longest first, cut into batches of at most ``max_batch_size`` rows (each padding little)."""
        order = self.by_length()
        return [self.take(order[start:start + max_batch_size]) for start in range(0, len(self), max_batch_size)]

    def padded_to(self, multiple: int, pad_id: int) -> np.ndarray:
        """``ids`` padded with ``pad_id`` to a multiple of ``multiple`` positions (masked: the results
        do not change)."""
        width = self.ids.shape[1]
        if width % multiple == 0:
            return self.ids
        extra = np.full((len(self), multiple - width % multiple), pad_id, np.int64)
        return np.concatenate([self.ids, extra], axis=1)
