"""Which decoding path runs a ``generate`` call, and why: decided here, in one function.

:func:`choose` reads the model's declared capabilities (:func:`seqjit.models.contract.declares`:
``native_step``, ``native_decode``; flags, not method identity), its replay and device, the options
and the batch, and returns a :class:`Choice`:

- ``device``: the model is on a device (``model.to("cuda")``); its runtime decodes
  (:mod:`seqjit.gpu.generate`, which picks the device loops or the CPU loops on the device model);
- ``runner``: a small batch (fewer than ``COMPACT_MIN_ROWS`` rows, sources x beams) decoded by a
  pooled runner (:mod:`~seqjit.decoding.runner_pool`): encoder and the whole decode in native
  programs bound once per shape;
- ``native``: the step plan lowered to native code runs the whole decode in one call per batch
  (:mod:`~seqjit.decoding.native_greedy`, :mod:`~seqjit.decoding.native_beam`), batches split over
  the intra-op threads when large;
- ``python``: the reference loops (:mod:`~seqjit.decoding.greedy`, :mod:`~seqjit.decoding.beam`),
  one ``model.step`` per token.

``search`` says which search runs on that path: ``greedy``, ``sampling`` or ``beam``.

Whether a plan lowers to native code is known only by lowering it; a ``runner`` or ``native`` choice
whose plan does not lower (:class:`seqjit.graph.lowering.Unsupported`) falls back to the next path
down (runner -> native -> python) with the same results; the runner pool remembers such a shape.
"""
from __future__ import annotations

from typing import NamedTuple

from seqjit.graph import profiler
from seqjit.models.contract import declares

from .native_beam import MAX_BEAM  # the widest beam the native loop keeps
from .native_greedy import COMPACT_MIN_ROWS  # rows (sources x beams) from which a decode is compacted, not pooled

DEVICE, RUNNER, NATIVE, PYTHON = "device", "runner", "native", "python"
PATHS = (DEVICE, RUNNER, NATIVE, PYTHON)


class Choice(NamedTuple):
    """The path a decode takes (one of :data:`PATHS`), the search it runs there (``greedy``,
    ``sampling``, ``beam``) and why, in words (for tests, ``seqjit inspect`` and bug reports)."""

    path: str
    search: str
    why: str


def search_of(options) -> str:
    """``beam``, ``sampling`` or ``greedy``: what ``options`` (checked) ask for."""
    return "beam" if options.beam_size > 1 else "sampling" if options.sampling else "greedy"


def _python_because(model, options, callback) -> str | None:
    """Why the step plan cannot run natively for these options (the Python loop runs); None when it can."""
    if not declares(model, "native_step"):
        return "the model does not declare native_step (it overrides step): the loop calls its step"
    if getattr(model, "replay", None) == "python":
        return "the model's replay is 'python' (the reference replay)"
    if profiler.active():
        return "seqjit.profile() is active (it times every step's nodes)"
    if callback is not None:
        return "a per-token callback"
    if options.return_attention:
        return "return_attention"
    if options.step_rules:
        return "a step-dependent suppression rule"
    if options.beam_size > 1:
        if options.beam_size > MAX_BEAM:
            return f"beam_size above {MAX_BEAM}"
        vocab = getattr(model, "target_vocab_size", None)
        if vocab is not None and vocab < 2:
            return "a vocabulary of one token"
        return None
    if options.repetition_penalty != 1.0:
        return "a repetition penalty"
    if options.no_repeat_ngram_size:
        return "an n-gram ban"
    return None


def choose(model, options, *, rows: int, max_batch_size: int = 64, callback=None) -> Choice:
    """The path that decodes ``rows`` sources (of one ``generate`` call, in batches of at most
    ``max_batch_size``) with ``options`` (checked :class:`~seqjit.decoding.options.DecodingOptions`)
    and ``callback``, and why. Every decoding entry point (``generate`` and ``generate_stream``, on the
    CPU and on a device) asks this function; nothing else decides.

    On a device, the device's runtime says which options its loops decline (``declines``, see
    :mod:`seqjit.models.devices`): those run the Python loops on the device model (``python``)."""
    search = search_of(options)
    device = getattr(model, "device", "cpu")
    if device != "cpu":
        declined = model.device_runtime.declines(model, options, callback)
        if declined is not None:
            return Choice(PYTHON, search, f"on {device!r}, the device loops decline {declined}: the Python loops "
                                          "run on the device model")
        return Choice(DEVICE, search, f"the model is on {device!r}: the device loops decode")
    python = _python_because(model, options, callback)
    if python is not None:
        return Choice(PYTHON, search, python)
    if rows > max_batch_size:
        return Choice(NATIVE, search, f"{rows} sources in batches of {max_batch_size}: one native decode per batch")
    if rows * options.beam_size >= COMPACT_MIN_ROWS:
        return Choice(NATIVE, search, f"{rows} x {options.beam_size} rows: one native decode per batch "
                                      f"(at least {COMPACT_MIN_ROWS} rows: compacted, split over threads)")
    if not declares(model, "native_decode"):
        return Choice(NATIVE, search, "the model does not declare native_decode (start/step_feeds of its own)")
    if options.forces_tokens and options.beam_size == 1:
        return Choice(NATIVE, search, "a forced token (one Python step around the native loop)")
    return Choice(RUNNER, search, f"{rows} x {options.beam_size} rows (fewer than {COMPACT_MIN_ROWS}): a pooled runner")


def native(choice: Choice) -> bool:
    """Whether ``choice`` runs the native programs (the runner's or the native decode's)."""
    return choice.path in (RUNNER, NATIVE)
