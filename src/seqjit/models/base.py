"""The contract every seq2seq architecture implements (Transformer, RNN and attention RNN Seq2Seq).

An architecture is a :class:`Seq2SeqModel` subclass with a :class:`~seqjit.models.config.ModelConfig`
subclass, registered by name in :data:`seqjit.models.ARCHITECTURES`. It declares its weights
(:meth:`Seq2SeqModel.weight_spec`) and builds two graphs from its config and weights; everything
else (running, state handling, beam reordering, save/load) is shared and lives here.

Encoder graph (``build_encoder_graph``), run once per source batch::

    inputs   src_ids      int   [B, S]    source token ids (padding after each row's length)
             src_lengths  int   [B]       valid tokens per row, in [0, S]
    outputs  memory       float [B, S, E] the encoder's output (for inspection and tests)
             <encoder state>              every other output: arrays with batch on axis 0 that the
                                          decoder step reads and never changes (Transformer:
                                          ``cross_k.{i}``/``cross_v.{i}`` [B, H, S, Dh] per decoder
                                          layer, computed once per source)

Decoder-step graph (``build_decoder_step_graph(with_attention)``), run once per generated token::

    inputs   prev_tokens  int   [B]       the previous target token (``decoder_start_id`` at step 0)
             step         int   []        0-based position of prev_tokens in the target sequence
             src_lengths  int   [B]
             <encoder state>              as output by the encoder graph (the names the step graph
                                          declares as inputs; the others are not kept)
             <decoder state>              ``decoder_state_specs(batch, max_length)``: name ->
                                          TensorSpec, batch on axis 0, all zeros before step 0
                                          (Transformer: ``self_k.{i}``/``self_v.{i}``
                                          [B, H, max_length, Dh], the self-attention KV cache;
                                          ``decoder_state_time_axes()`` may name an axis of which
                                          only the first ``step`` entries are in use)
    outputs  logits       float [B, V]    unnormalised next-token scores
             attention    float [B, ..., S]  only when ``with_attention``: attention over the
                                          source, source axis last (Transformer: [B, layers, H, S])
             next.<name>                  for each decoder state name: the state after this step.
                                          It may be the input array itself, updated in place (the
                                          KV cache write); otherwise it is copied back into it.

The step graph's shapes depend only on (B, S, max_length), so its plan is made once per decode and
replayed for every token. Beam search reorders (or expands) the batch by taking rows on axis 0 of
every state array: :meth:`DecoderState.reorder` does it for any architecture.

The Python API every model gets from this base class::

    encoded = model.encode(src_ids, src_lengths)          # dict: memory + encoder state
    state = model.start(src_ids, src_lengths, max_length=64)   # encode + zeroed decoder state
    logits = model.step(state, prev_tokens)               # [B, V]; state advanced in place
    logits, attn = model.step(state, prev_tokens, with_attention=True)
    state.reorder(beam_rows)                              # int [B'] rows to keep, in order
    model.logits(src_ids, tgt_ids, src_lengths)           # teacher forcing [B, T, V]
    model.score(sources, targets)                         # per-token log-probs of given targets
    model.pad_id, model.eos_id, model.decoder_start_id, model.source_vocab_size
    model.source_pad_id                                   # the id filling a source past its length
    model.to("cuda"); model.device                        # run on the GPU (seqjit.gpu); "cpu" back

On the GPU (``model.to("cuda")``) the same calls work; the states are device arrays
(:mod:`seqjit.gpu`), ``step`` takes host or device tokens and returns host logits.
"""
from __future__ import annotations

import importlib
import threading

import numpy as np

from seqjit.graph.ops import TensorSpec
from seqjit.models.contract import (ATTENTION, LOGITS, MEMORY, NEXT, PREV_TOKENS, SRC_IDS,
                                    SRC_LENGTHS, STEP, DecoderState, check_ids, check_source)
from seqjit.models.decode_options import with_options
from seqjit.models.devices import check_device, runtime_for
from seqjit.models.weight_checks import check_weights

#: the module that decodes for :meth:`Seq2SeqModel.generate` and :meth:`~Seq2SeqModel.generate_stream`
#: (``decode(model, sources, lengths, max_batch_size, callback, options)``, ``generate_stream(model, source,
#: **options)``). The
#: decoding layer sits above the models, so a model finds it by name when it first decodes, as it finds
#: a device's runtime (:data:`seqjit.models.devices.PROVIDERS`) and as the executors find kernel backends:
#: the models import nothing of ``decoding``.
DECODER = "seqjit.decoding"


def _decoder():
    """The decoding layer's module, :data:`DECODER` (imported once; later calls are a dict look-up)."""
    return importlib.import_module(DECODER)

class Seq2SeqModel:
    """Base of every architecture. Subclasses set ``arch`` and ``config_class`` and implement
    :meth:`weight_spec`, :meth:`build_encoder_graph`, :meth:`build_decoder_step_graph` and
    :meth:`decoder_state_specs` (see the module docstring for the graphs' contract)."""

    arch: str = ""
    config_class: type = None

    def __init__(self, config, weights: dict, *, backend=None, source: str = "weights", replay=None):
        if not isinstance(config, self.config_class):
            raise TypeError(f"config must be a {self.config_class.__name__}, got {type(config).__name__}")
        self.config = config
        self.weights = check_weights(weights, self.weight_spec(config), source)
        self.backend = backend
        #: "native" (plans lowered to compiled code) or "python" (the reference replay); None: the
        #: executor's default (``SEQJIT_REPLAY``, else native)
        self.replay = replay
        self._executors: dict = {}
        self._executors_lock = threading.Lock()
        self._runtime = None  # the device's runtime while the model is on a device (seqjit.models.devices)
        self._cpu_backend = backend

    # -- device ----------------------------------------------------------------------------------
    @property
    def device(self) -> str:
        """``"cpu"``, or ``"cuda"`` after :meth:`to`."""
        return "cpu" if self._runtime is None else self._runtime.device

    @property
    def device_runtime(self):
        """The runtime of the device the model is on (:mod:`seqjit.models.devices`); None on the CPU."""
        return self._runtime

    def to(self, device: str):
        """Run on ``device`` (``"cuda"`` or ``"cpu"``); returns the model, moved in place. On the GPU
        every weight the graphs read is uploaded once, plans keep their buffers on the device and
        ``generate`` decodes there (:mod:`seqjit.gpu`). Raises :class:`~seqjit.errors.CudaUnavailable`
        (naming what is missing) without a usable GPU, :class:`~seqjit.errors.DeviceOutOfMemory` when
        the weights do not fit."""
        target = check_device(device)
        if target == self.device:
            return self
        if target == "cpu":
            self._attach(None)
            return self
        runtime = runtime_for(target, self)
        self._cpu_backend = self.backend
        self._attach(runtime)
        try:
            runtime.upload(self)
        except BaseException:
            self._attach(None)
            raise
        return self

    def _attach(self, runtime) -> None:
        """Run on ``runtime``'s device (None: the CPU); the executors made so far are dropped."""
        with self._executors_lock:
            self._runtime, self._executors = runtime, {}
            self.backend = self._cpu_backend if runtime is None else runtime.backend

    # -- capabilities the decoding layer reads (seqjit.models.contract.declares) -----------------
    @classmethod
    def native_step(cls) -> bool:
        """Whether this class steps as the base class does (``step`` not overridden), so the native
        decoding loops may replay its step plan instead of calling ``step``."""
        return cls.step is Seq2SeqModel.step

    @classmethod
    def native_decode(cls) -> bool:
        """Whether this class also starts a decode and feeds its steps as the base class does
        (``start``, ``start_checked``, ``start_from``, ``step_feeds``, ``step``), so a runner may replay
        a whole decode."""
        return all(getattr(cls, name) is getattr(Seq2SeqModel, name)
                   for name in ("start", "start_checked", "start_from", "step_feeds", "step"))

    # -- to implement --------------------------------------------------------------------------
    @classmethod
    def weight_spec(cls, config) -> dict:
        """name -> TensorSpec of every weight the architecture needs for ``config``."""
        raise NotImplementedError

    def build_encoder_graph(self):
        raise NotImplementedError

    def build_decoder_step_graph(self, with_attention: bool = False):
        raise NotImplementedError

    def decoder_state_specs(self, batch: int, max_length: int) -> dict:
        raise NotImplementedError

    def decoder_state_time_axes(self) -> dict:
        """Optional: decoder state name -> the axis of which only the first ``step`` entries are
        used (a KV cache's time axis), so beam reordering copies only that prefix. Default: none."""
        return {}

    # -- special tokens --------------------------------------------------------------------------
    @property
    def pad_id(self) -> int:
        return self.config.pad_id

    @property
    def source_pad_id(self) -> int:
        """The id that fills a source past its length (:func:`seqjit.decoding.inputs.pad_sources`,
        :meth:`prepare`): the config's ``src_pad_id`` where it has one, else ``pad_id`` when it lies in
        the source vocabulary, else 0. ``pad_id`` is a target-side id (the token never generated), and
        may lie outside a smaller source vocabulary; every architecture masks a source's positions past
        its length by ``src_lengths``, so the padded positions' ids are only looked up, never read."""
        own = getattr(self.config, "src_pad_id", None)
        if own is not None:
            return own
        pad, vocab = self.pad_id, self.source_vocab_size
        if pad is None or (vocab is not None and not 0 <= pad < vocab):
            return 0
        return pad

    @property
    def eos_id(self) -> int:
        return self.config.eos_id

    @property
    def decoder_start_id(self) -> int:
        return self.config.decoder_start_id

    @property
    def source_vocab_size(self):
        return getattr(self.config, "src_vocab_size", None)

    @property
    def target_vocab_size(self):
        return getattr(self.config, "tgt_vocab_size", None)

    # -- running ---------------------------------------------------------------------------------
    def executor(self, name: str):
        """The cached :class:`~seqjit.graph.Executor` of graph ``name`` ("encoder",
        "decoder_step", "decoder_step+attention", or an architecture's own)."""
        ex = self._executors.get(name)
        if ex is None:
            from seqjit.graph import Executor

            with self._executors_lock:
                ex = self._executors.get(name)
                if ex is None:
                    ex = self._executors[name] = Executor(
                        self._build_graph(name), backend=self.backend, replay=self.replay,
                        device=None if self._runtime is None else self._runtime.placement)
        return ex

    def set_replay(self, replay: str | None) -> None:
        """Run this model's plans natively (``"native"``), in Python (``"python"``: the reference
        replay, and the profiler's), or as the default (None); drops the plans made so far."""
        if replay not in (None, "native", "python"):
            raise ValueError(f"replay must be 'native', 'python' or None, got {replay!r}")
        with self._executors_lock:
            self.replay, self._executors = replay, {}

    def has_full_decoder(self) -> bool:
        """Whether the architecture builds a full-sequence (teacher-forcing) decoder graph,
        ``decoder_full``: ``build_decoder_full_graph()`` -> ``tgt_ids`` and encoder outputs -> ``logits``."""
        return hasattr(self, "build_decoder_full_graph")

    def _build_graph(self, name: str):
        if name == "encoder":
            return self.build_encoder_graph()
        if name in ("decoder_step", "decoder_step+attention"):
            return self.build_decoder_step_graph(with_attention=name.endswith("+attention"))
        if name == "decoder_full" and self.has_full_decoder():
            return self.build_decoder_full_graph()
        raise ValueError(f"{type(self).__name__} has no graph {name!r}")

    def encode(self, src_ids, src_lengths=None) -> dict:
        """Run the encoder graph; returns its outputs (``memory`` and the encoder state)."""
        src_ids, src_lengths = check_source(src_ids, src_lengths)
        return self.executor("encoder").run({SRC_IDS: src_ids, SRC_LENGTHS: src_lengths})

    def start(self, src_ids, src_lengths=None, *, max_length: int) -> DecoderState:
        """Encode ``src_ids`` and return a fresh :class:`DecoderState` for at most ``max_length`` steps."""
        src_ids, src_lengths = check_source(src_ids, src_lengths)
        return self.start_checked(src_ids, src_lengths, max_length=max_length)

    def start_checked(self, src_ids: np.ndarray, src_lengths: np.ndarray, *, max_length: int) -> DecoderState:
        """:meth:`start` of ids already checked as :func:`check_source` returns them (int64 [B, S],
        lengths int64 [B] in [0, S]): the decoding layer checks a call's ids once, in
        ``pad_sources``, and starts every batch of it here."""
        if self._runtime is not None:
            return self._runtime.start(self, src_ids, src_lengths, max_length)
        encoded = self.executor("encoder").run({SRC_IDS: src_ids, SRC_LENGTHS: src_lengths})
        return self.start_from(encoded, src_lengths, max_length)

    def start_from(self, encoded: dict, src_lengths, max_length: int) -> DecoderState:
        """A fresh :class:`DecoderState` from :meth:`encode`'s outputs, for at most ``max_length`` steps."""
        if self._runtime is not None:
            return self._runtime.start_from(self, encoded, src_lengths, max_length)
        src_lengths = np.array(src_lengths, dtype=np.int64)  # a copy: reorder writes into it
        if int(max_length) != max_length or max_length < 1:
            raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
        needed = [n for n in self.executor("decoder_step").graph.inputs if n in encoded]
        specs = self.decoder_state_specs(src_lengths.shape[0], int(max_length))
        decoder = {name: np.zeros(s.shape, s.dtype) for name, s in specs.items()}
        return DecoderState({n: encoded[n] for n in needed}, decoder, src_lengths, int(max_length),
                            self.decoder_state_time_axes())

    def step(self, state: DecoderState, prev_tokens, *, with_attention: bool = False, copy: bool = True):
        """One decoder step: returns ``logits`` [B, V] (and ``attention`` when asked, as a pair);
        advances ``state`` (its arrays are updated in place, ``state.step`` += 1)."""
        if self._runtime is not None:
            return self._runtime.step(self, state, prev_tokens, with_attention)
        tokens = np.asarray(prev_tokens)
        if tokens.dtype.kind not in "iu" or tokens.shape != (state.batch,):
            raise ValueError(f"prev_tokens must be an integer array of shape [{state.batch}], got {tokens.dtype} {list(tokens.shape)}")
        if state.step >= state.max_length:
            raise ValueError(f"the decoder state is full: step {state.step} reached max_length {state.max_length}")
        feeds = self.step_feeds(state, tokens.astype(np.int64, copy=False))
        name = "decoder_step+attention" if with_attention else "decoder_step"
        out = self.step_plan(state, name, feeds).run(feeds, copy=False)
        for key, arr in state.decoder.items():
            new = out[NEXT + key]
            if new is not arr:
                np.copyto(arr, new)
        state.step += 1
        logits = out[LOGITS].copy() if copy else out[LOGITS]
        if with_attention:
            return logits, out[ATTENTION].copy()
        return logits

    def step_feeds(self, state: DecoderState, tokens: np.ndarray) -> dict:
        """The step graph's inputs for ``state`` and int64 ``tokens`` [B]."""
        return {PREV_TOKENS: tokens, STEP: np.array(state.step, np.int64), SRC_LENGTHS: state.src_lengths,
                **state.encoder, **state.decoder}

    def step_plan(self, state: DecoderState, name: str, feeds: dict):
        """The plan of step graph ``name`` that ``state`` holds for its batch size (leased on the
        first step and after the batch changed; its buffers are this decode's alone)."""
        held = state.leases.get(name)
        if held is not None and held[2] == state.batch:
            return held[1]
        ex = self.executor(name)
        if held is not None:
            held[0].release(held[1])
        plan = ex.lease(feeds)
        state.leases[name] = (ex, plan, state.batch)
        return plan

    def logits_stepwise(self, src_ids, tgt_ids, src_lengths=None) -> np.ndarray:
        """Teacher-forced logits [B, T, V] through the decoder-step graph, one step per position:
        ``out[:, t]`` scores the token following ``tgt_ids[:, :t + 1]``."""
        src_ids, src_lengths = check_source(src_ids, src_lengths)
        tgt_ids = check_ids("tgt_ids", tgt_ids)
        state = self.start(src_ids, src_lengths, max_length=tgt_ids.shape[1])
        try:
            steps = [self.step(state, tgt_ids[:, t]) for t in range(tgt_ids.shape[1])]
        finally:
            state.close()
        return np.stack(steps, axis=1)

    def logits(self, src_ids, tgt_ids, src_lengths=None) -> np.ndarray:
        """Teacher-forced logits [B, T, V]: ``out[:, t]`` scores the token following
        ``tgt_ids[:, :t + 1]``; one pass of the ``decoder_full`` graph where the architecture has
        one (:meth:`has_full_decoder`), else step by step (:meth:`logits_stepwise`)."""
        if not self.has_full_decoder():
            return self.logits_stepwise(src_ids, tgt_ids, src_lengths)
        src_ids, src_lengths = check_source(src_ids, src_lengths)
        tgt_ids = check_ids("tgt_ids", tgt_ids)
        if src_ids.shape[0] != tgt_ids.shape[0]:
            raise ValueError(f"src_ids and tgt_ids must have the same batch size, got {src_ids.shape[0]} and {tgt_ids.shape[0]}")
        available = {"tgt_ids": tgt_ids, SRC_LENGTHS: src_lengths, **self.encode(src_ids, src_lengths)}
        ex = self.executor("decoder_full")
        return ex.run({name: available[name] for name in ex.graph.inputs})["logits"]

    # -- decoding --------------------------------------------------------------------------------
    @with_options
    def generate(self, sources, *, lengths=None, max_batch_size: int = 64, callback=None, **options) -> list:
        """Decode ``sources`` (token-id sequences of any lengths); returns one
        :class:`~seqjit.decoding.GenerationResult` per source: :func:`seqjit.decoding.generate`,
        whose docstring describes every argument. A Hugging Face name (``num_beams``, ``top_k``,
        ``max_new_tokens`` ...) is an :class:`~seqjit.errors.UnknownOptionError` naming the seqjit
        option it means."""
        return _decoder().decode(self, sources, lengths, max_batch_size, callback, options)

    @with_options
    def generate_stream(self, source, **options):
        """Yield :class:`~seqjit.decoding.StepToken` for one source as tokens are produced
        (greedy or sampling); see :func:`seqjit.decoding.generate_stream`."""
        return _decoder().generate_stream(self, source, **options)

    def score(self, sources, targets, *, max_batch_size: int = 64) -> list:
        """The log-probabilities of given ``targets`` (one token-id sequence per source), teacher-forced
        as CTranslate2's ``score_batch``: one :class:`~seqjit.decoding.scoring.ScoringResult` per
        source (``ids``: the target then the end token, ``log_probs``, ``score``); see
        :func:`seqjit.decoding.scoring.score`."""
        return importlib.import_module(DECODER + ".scoring").score(self, sources, targets,
                                                                   max_batch_size=max_batch_size)

    def prepare(self):
        """Do now the part of a first decode that does not depend on the batch shape (importing the
        decoding layer and the native VM, the weight copies its kernels read), by running the encoder
        on a one-token source and one decoder step (the logits are not looked at, so weights that give
        NaN still load): the loaders call it, so a first ``generate`` at a new shape costs about as
        much as a later one. Returns the model."""
        _decoder()
        if self._runtime is None:
            state = self.start(np.array([[self.source_pad_id]], np.int64), max_length=1)
            try:
                self.step(state, np.array([self.decoder_start_id], np.int64), copy=False)
            finally:
                state.close()
        return self

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write ``config.json`` and ``model.safetensors`` into directory ``path``."""
        from seqjit.models.io import save_model

        save_model(self, path)

    def __repr__(self) -> str:
        n = sum(int(np.prod(s.shape)) for s in self.weight_spec(self.config).values())
        return f"{type(self).__name__}({n / 1e6:.2f}M parameters, {self.config})"


# DecoderState, the value names and the id checks live in the leaf module seqjit.models.contract (the
# decoding and GPU layers import them from there); re-exported here for the architectures and callers
__all__ = ["Seq2SeqModel", "DecoderState", "TensorSpec", "check_source", "check_ids", "check_weights", "SRC_IDS",
           "SRC_LENGTHS", "MEMORY", "PREV_TOKENS", "STEP", "LOGITS", "ATTENTION", "NEXT"]
