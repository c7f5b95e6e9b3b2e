"""The device side of a model on the GPU (made by :func:`seqjit.gpu.devices.runtime` when the model
moves there; the runtime protocol: :mod:`seqjit.models.devices`): ``start`` / ``step`` on device arrays.

On the device, :meth:`DeviceRuntime.start` uploads the source ids and lengths (the only uploads of a
decode), runs the encoder plan and keeps its device outputs as the encoder state (the encoder plan
stays leased by the decode); the decoder state starts as device zeros. :meth:`DeviceRuntime.run_step`
feeds device tokens and returns device logits: nothing crosses to the host.
"""
from __future__ import annotations

import numpy as np

from seqjit.kernels import _cuda
from seqjit.kernels.layout import cuda as layout
from seqjit.models.contract import ATTENTION, LOGITS, NEXT, SRC_IDS, SRC_LENGTHS

from .state import DeviceDecoderState


class DeviceRuntime:
    """What a model on the GPU holds: its placement (uploaded constants) and device helpers."""

    device = "cuda"
    backend = "cuda"  # the kernel backend of the model's executors while it is on the GPU

    def __init__(self, placement):
        self.placement = placement
        self._suppressed: dict = {}

    def upload(self, model) -> None:
        """Every weight the model's encoder and decoder-step graphs read, uploaded now, once."""
        for name in ("encoder", "decoder_step"):
            for value in model.executor(name).graph.constants.values():
                self.placement.constant(value)

    def generate(self, model, sources, **arguments) -> list:
        """:func:`seqjit.decoding.generate` on the GPU (:func:`seqjit.gpu.generate.generate`)."""
        from .generate import generate

        return generate(model, sources, **arguments)

    def supports(self, model, options, callback) -> str | None:
        """The device path's declaration: what of ``options`` (and ``callback``) the device loops do
        not decode, in words; None when they decode it all (:func:`seqjit.gpu.generate.supports`)."""
        from .generate import supports

        return supports(options, callback, model.target_vocab_size or 0, int(model.eos_id))

    # -- starting a decode -----------------------------------------------------------------------
    def start(self, model, src_ids, src_lengths, max_length: int) -> DeviceDecoderState:
        """``model.start`` on the device, of ids already checked (the model's ``start_checked``)."""
        feeds = {SRC_IDS: _cuda.to_device_mirrored(src_ids), SRC_LENGTHS: _cuda.to_device_mirrored(src_lengths)}
        ex = model.executor("encoder")
        plan = ex.lease(feeds)
        try:
            encoded = plan.run(feeds, copy=False)
            state = self.start_from(model, encoded, feeds[SRC_LENGTHS], max_length)
        except BaseException:
            ex.release(plan)
            raise
        state.leases["encoder"] = (ex, plan, int(src_ids.shape[0]))  # its outputs are the encoder state
        return state

    def start_from(self, model, encoded: dict, src_lengths, max_length: int) -> DeviceDecoderState:
        if int(max_length) != max_length or max_length < 1:
            raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
        if not _cuda.is_device_array(src_lengths):
            src_lengths = _cuda.to_device_mirrored(np.asarray(src_lengths, dtype=np.int64))
        batch = int(src_lengths.shape[0])
        needed = [n for n in model.executor("decoder_step").graph.inputs if n in encoded]
        encoder = {n: self.placement.feed(encoded[n]) for n in needed}
        specs = model.decoder_state_specs(batch, int(max_length))
        decoder = {name: layout.zeros(s.shape, s.dtype) for name, s in specs.items()}
        return DeviceDecoderState(encoder, decoder, src_lengths, int(max_length), model.decoder_state_time_axes())

    # -- stepping --------------------------------------------------------------------------------
    def run_step(self, model, state, tokens, with_attention: bool = False):
        """One decoder step on device ``tokens`` (int64 [B]): ``(logits, attention or None)`` as device
        arrays (the plan's buffers: valid until the next step); ``state`` advanced."""
        if state.step >= state.max_length:
            raise ValueError(f"the decoder state is full: step {state.step} reached max_length {state.max_length}")
        feeds = model.step_feeds(state, tokens)
        name = "decoder_step+attention" if with_attention else "decoder_step"
        out = model.step_plan(state, name, feeds).run(feeds, copy=False)
        for key, arr in state.decoder.items():
            new = out[NEXT + key]
            if new is not arr:
                layout.copy(new, arr)
        state.step += 1
        return out[LOGITS], (out[ATTENTION] if with_attention else None)

    def step(self, model, state, prev_tokens, with_attention: bool = False):
        """``model.step`` on the GPU: host or device tokens in, host logits (and attention) out."""
        if _cuda.is_device_array(prev_tokens):
            if tuple(prev_tokens.shape) != (state.batch,) or np.dtype(prev_tokens.dtype) != np.int64:
                raise ValueError(f"prev_tokens must be an int64 array of shape [{state.batch}], got "
                                 f"{prev_tokens.dtype} {list(prev_tokens.shape)}")
            tokens = prev_tokens
        else:
            host = np.asarray(prev_tokens)
            if host.dtype.kind not in "iu" or host.shape != (state.batch,):
                raise ValueError(f"prev_tokens must be an integer array of shape [{state.batch}], got "
                                 f"{host.dtype} {list(host.shape)}")
            vocab = model.target_vocab_size
            if vocab is not None and host.size and (host.min() < 0 or host.max() >= vocab):
                raise ValueError(f"prev_tokens must lie in [0, {vocab}), got values from {host.min()} to {host.max()}")
            tokens = _cuda.to_device(host.astype(np.int64))
        logits, attention = self.run_step(model, state, tokens, with_attention)
        if with_attention:
            return logits.copy_to_host(), attention.copy_to_host()
        return logits.copy_to_host()

    def suppressed(self, ids: tuple):
        """The device array of token ids never generated (uploaded once per set; ``[-1]`` for none)."""
        key = tuple(int(i) for i in ids)
        arr = self._suppressed.get(key)
        if arr is None:
            arr = self._suppressed[key] = _cuda.to_device(np.array(key or (-1,), np.int64))
        return arr
