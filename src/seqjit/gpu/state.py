"""The decoder state of a model on the GPU: every array a device array, reordered on the device."""
from __future__ import annotations

import numpy as np

from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as layout
from seqjit.models.contract import DecoderState


class DeviceDecoderState(DecoderState):
    """:class:`~seqjit.models.contract.DecoderState` with device arrays: the encoder state, the decoder state
    (a Transformer's KV cache, an RNN's hidden states) and the source lengths all live on the GPU.

    :meth:`reorder` gathers rows on the device. Indices may be a device array (beam search computes them
    there: nothing crosses) or host integers (uploaded: checked first, as on the CPU). When the batch
    size stays the same, each decoder array is gathered into a spare buffer of its shape, which then
    takes its place (the step plan reads whichever array the state holds: no copy back); a KV cache
    gathers only its first ``step`` positions."""

    def __init__(self, encoder: dict, decoder: dict, src_lengths, max_length: int, time_axes: dict | None = None):
        super().__init__(encoder, decoder, src_lengths, max_length, time_axes)
        self._spare: dict = {}

    @property
    def batch(self) -> int:
        return int(self.src_lengths.shape[0])

    def _device_indices(self, indices):
        if _cuda.is_device_array(indices):
            if len(indices.shape) != 1 or np.dtype(indices.dtype).kind not in "iu":
                raise TypeError(f"indices must be a 1-D integer array, got {indices.dtype} with shape {list(indices.shape)}")
            return indices, None
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise TypeError(f"indices must be a 1-D integer array, got {idx.dtype} with shape {list(idx.shape)}")
        if idx.size and (idx.min() < 0 or idx.max() >= self.batch):
            raise ValueError(f"indices must lie in [0, {self.batch}), got values from {idx.min()} to {idx.max()}")
        idx = idx.astype(np.int64)
        return _cuda.to_device(idx), idx

    def _prefix(self, name: str, arr):
        """The part of decoder array ``name`` in use: a KV cache's first ``step`` positions."""
        axis = self.time_axes.get(name)
        if axis is None or self.step >= arr.shape[axis]:
            return arr
        return arr[(slice(None),) * axis + (slice(0, self.step),)]

    def reorder(self, indices, *, encoder: bool = True) -> None:
        """Keep rows ``indices`` (int [B'], host or device) of every state array, in that order; see
        :meth:`DecoderState.reorder <seqjit.models.contract.DecoderState.reorder>`."""
        idx, host_idx = self._device_indices(indices)
        rows = int(idx.shape[0])
        same = rows == self.batch
        if same and host_idx is not None and np.array_equal(host_idx, np.arange(rows)):
            return
        for name, arr in self.decoder.items():
            if same:
                spare = self._spare.get(name)
                if spare is None:
                    spare = _cuda.device_empty(tuple(arr.shape), arr.dtype)
                layout.gather_rows(self._prefix(name, arr), idx, self._prefix(name, spare))
                self.decoder[name], self._spare[name] = spare, arr
            else:
                new = _cuda.device_empty((rows,) + tuple(arr.shape[1:]), arr.dtype)
                layout.gather_rows(self._prefix(name, arr), idx, self._prefix(name, new))
                self.decoder[name] = new
                self._spare.pop(name, None)
        if encoder or not same:
            self.encoder = {name: _gathered(arr, idx, rows) for name, arr in self.encoder.items()}
            mirror = _cuda.host_mirror(self.src_lengths)
            self.src_lengths = _gathered(self.src_lengths, idx, rows)
            if mirror is not None and host_idx is not None:
                self.src_lengths._seqjit_host = mirror[host_idx]


def _gathered(arr, idx, rows: int):
    out = _cuda.device_empty((rows,) + tuple(arr.shape[1:]), arr.dtype)
    return layout.gather_rows(arr, idx, out)
