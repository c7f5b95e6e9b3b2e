"""Native greedy decoding (or sampling) of a small batch with its set-up made once: a :class:`GreedyRunner`.

:func:`seqjit.decoding.native_greedy.native_greedy` already decodes every token in one native call,
but a ``generate`` around it without a runner pays, per call, for leasing the encoder and step plans
and checking their feeds, binding both programs, a fresh ``DecoderState`` and copying the encoder
outputs: on a small model a large share of a batch-1 decode. A runner holds, for one
batch shape (rows, padded source width, ``max_length``), the leased encoder and step plans with
their native programs bound to the runner's own arrays. A decode copies the source ids in, runs the
encoder program, copies its outputs into the step program's inputs and runs the greedy loop: the same
programs and the same arithmetic as the general path, so the same tokens and scores.

Runners serve batches of fewer than ``COMPACT_MIN_ROWS`` rows (which native greedy never compacts);
each model keeps a few per shape (:class:`~seqjit.decoding.runner_pool.RunnerPool`), each used by one
caller at a time.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph import _native_vm
from seqjit.graph.lowering import Unsupported
from seqjit.kernels._threads import get_num_threads
from seqjit.kernels.sampling import philox
from seqjit.models.contract import LOGITS, NEXT, PREV_TOKENS, SRC_IDS, SRC_LENGTHS, STEP

from . import prefix as prefixes
from .native_greedy import greedy_results, sampling_args

class GreedyRunner:
    """The encoder and decoder-step programs of one batch shape, bound once; :meth:`decode` runs them.
    ``beams`` step rows per source (:class:`~seqjit.decoding.beam_runner.BeamRunner`: K > 1)."""

    beams = 1

    def __init__(self, model, batch: int, width: int, max_length: int):
        self.executors = (model.executor("encoder"), model.executor("decoder_step"))
        self.plans = []
        try:
            self._build(model, batch, width, max_length)
        except BaseException:
            self.close()
            raise

    def _build(self, model, batch, width, max_length):
        enc_ex, step_ex = self.executors
        self.ids = np.zeros((batch, width), np.int64)
        self.lengths = np.zeros(batch, np.int64)
        enc_feeds = {SRC_IDS: self.ids, SRC_LENGTHS: self.lengths}
        enc_plan = enc_ex.lease(enc_feeds)
        self.plans.append((enc_ex, enc_plan))
        self.encoder = enc_plan.native_replay(enc_feeds)
        if self.encoder is None:
            raise Unsupported("encoder plan")
        self.encoder.bind(enc_feeds)
        # the step reads the encoder's outputs from arrays of its own (an output may be a strided view),
        # each source's row repeated for its beams
        rows = batch * self.beams
        needed = [n for n in step_ex.graph.inputs if n in self.encoder.outputs]
        self.encoded = [(self.encoder.output(n), np.zeros((rows,) + self.encoder.output(n).shape[1:],
                                                          self.encoder.output(n).dtype)) for n in needed]
        self.step_lengths = self.lengths if self.beams == 1 else np.zeros(rows, np.int64)
        specs = model.decoder_state_specs(rows, max_length)
        self.decoder = decoder = {name: np.zeros(s.shape, s.dtype) for name, s in specs.items()}
        self.time_axes = timed = model.decoder_state_time_axes()
        # a KV cache is written at step t before it is read up to t: only state without a time axis
        # (an RNN's hidden state) carries over between decodes and is zeroed
        self.to_zero = [arr for name, arr in decoder.items() if name not in timed]
        feeds = {PREV_TOKENS: np.zeros(rows, np.int64), STEP: np.zeros((), np.int64), SRC_LENGTHS: self.step_lengths,
                 **{n: dst for n, (_, dst) in zip(needed, self.encoded)}, **decoder}
        step_plan = step_ex.lease(feeds)
        self.plans.append((step_ex, step_plan))
        native = step_plan.native_replay(feeds)
        if native is None:
            raise Unsupported("decoder step plan")
        self.bound = arrays = native.bind(feeds)
        self.inputs = native.inputs
        self.copy_back = native.copy_back_program([(NEXT + key, key) for key in decoder])
        self.copy_back.set_inputs(arrays)
        self.program, self.logits = native.program, native.output(LOGITS)
        self.prev_bound, self.step_bound = arrays[native.inputs.index(PREV_TOKENS)], arrays[native.inputs.index(STEP)]
        self.start_id, self.eos = int(model.decoder_start_id), int(model.eos_id)
        self.max_length = max_length
        self.nbytes = (enc_plan.memory.planned_bytes + step_plan.memory.planned_bytes
                       + sum(a.nbytes for a in decoder.values()) + sum(d.nbytes for _, d in self.encoded))

    def start(self, ids: np.ndarray, lengths: np.ndarray) -> int:
        """Encode ``ids`` [batch, width] (int64) with ``lengths`` and reset the step's inputs; returns
        the thread count to run with."""
        np.copyto(self.ids, ids)
        np.copyto(self.lengths, lengths)
        threads = get_num_threads()
        self.encoder.program.run(threads)
        k = self.beams
        for src, dst in self.encoded:
            np.copyto(dst.reshape((src.shape[0], k) + src.shape[1:]) if k > 1 else dst, src[:, None] if k > 1 else src)
        if k > 1:
            np.copyto(self.step_lengths.reshape(-1, k), lengths[:, None])
        for arr in self.to_zero:
            arr.fill(0)
        self.prev_bound.fill(self.start_id)
        self.step_bound.fill(0)
        return threads

    def decode(self, ids: np.ndarray, lengths: np.ndarray, options, banned: np.ndarray, prefix=None) -> list:
        """Results for ``ids`` [batch, width] (int64) with ``lengths``, the caller's whole batch in its
        order; ``options`` greedy or sampling with a seed (the ``runner`` path of :func:`seqjit.decoding.strategy.choose`);
        ``prefix``: each row's ``target_prefix`` (:func:`seqjit.decoding.prefix.prefix_rows`), or None."""
        threads = self.start(ids, lengths)
        batch, steps = self.ids.shape[0], self.max_length
        out = np.zeros((batch, steps), np.int64)
        out_lengths = np.zeros(batch, np.int64)
        scores = np.zeros(batch if options.return_scores else 0, np.float64)
        args = (self.program, self.copy_back, self.logits, self.prev_bound, self.step_bound, out, out_lengths,
                scores, banned, self.eos, int(options.min_length), 0, threads, 0)
        forced = None if prefix is None else np.ascontiguousarray(prefix[:, :steps])
        if options.sampling:
            seed = philox.fresh_seed() if options.seed is None else options.seed
            _native_vm.sample(*args, np.arange(batch, dtype=np.int64), seed, *sampling_args(options), forced)
        else:
            _native_vm.greedy(*args, forced)
        return greedy_results(out, out_lengths, scores if options.return_scores else None, self.eos,
                              None if prefix is None else prefixes.lengths(prefix, batch))

    def close(self) -> None:
        """Give the plans back to their executors."""
        plans, self.plans = self.plans, []
        for ex, plan in plans:
            ex.release(plan)
