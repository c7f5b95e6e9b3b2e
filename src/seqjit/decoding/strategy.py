"""Which decoding path runs a ``generate`` call, and why: decided here, in one function, from the
paths' own declarations.

Each path declares ``supports(request) -> reason | None`` (a :class:`~seqjit.decoding.spec.Request`:
the model, the options, the batch, the callback): the device runtime's ``supports``
(:mod:`seqjit.models.devices`), :func:`seqjit.decoding.runner_pool.supports`,
:func:`seqjit.decoding.native_greedy.supports` / :func:`seqjit.decoding.native_beam.supports` and
:func:`seqjit.decoding.greedy.supports` (the Python loops: everything). :func:`choose` takes the first
path, in the order below, that accepts the request, and returns a :class:`Choice`:

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

from . import native_beam, native_greedy, runner_pool
from .greedy import supports as python_supports
from .native_greedy import COMPACT_MIN_ROWS  # rows (sources x beams) from which a decode is compacted, not pooled
from .spec import Request, search_of

DEVICE, RUNNER, NATIVE, PYTHON = "device", "runner", "native", "python"
PATHS = (DEVICE, RUNNER, NATIVE, PYTHON)


class Choice(NamedTuple):
    """The path a decode takes (one of :data:`PATHS`), the search it runs there (``greedy``,
    ``sampling``, ``beam``) and why, in words (for tests, ``seqjit inspect`` and bug reports)."""

    path: str
    search: str
    why: str


def device_supports(request: Request) -> str | None:
    """The device path's declaration: the model's device runtime says what its loops do not decode
    (``supports``, see :mod:`seqjit.models.devices`)."""
    device = getattr(request.model, "device", "cpu")
    if device == "cpu":
        return "the model is on the CPU"
    return request.model.device_runtime.supports(request.model, request.options, request.callback)


def declarations(request: Request) -> dict:
    """Each path's answer to ``request``, in :data:`PATHS` order: None (it decodes it) or why not."""
    native = (native_beam.supports if request.options.beam_size > 1 else native_greedy.supports)(request)
    return {DEVICE: device_supports(request), RUNNER: runner_pool.supports(request, native), NATIVE: native,
            PYTHON: python_supports(request)}


def _what(path: str, request: Request) -> str:
    if path == DEVICE:
        return f"the model is on {getattr(request.model, 'device', 'cpu')!r}: the device loops decode"
    if path == RUNNER:
        return (f"{request.rows} x {request.options.beam_size} rows (fewer than {COMPACT_MIN_ROWS}): a pooled "
                "runner")
    if path == NATIVE:
        return "one native decode per batch"
    device = getattr(request.model, "device", "cpu")
    return "the Python loops" + (f" on the {device!r} model" if device != "cpu" else "")


def choose(model, options, *, rows: int, max_batch_size: int = 64, callback=None, stream: bool = False) -> Choice:
    """The path that decodes ``rows`` sources (of one ``generate`` call, in batches of at most
    ``max_batch_size``; ``stream``: one source of ``generate_stream``) with ``options`` (a
    :class:`~seqjit.decoding.spec.DecodeSpec` or checked options) and ``callback``, and why: the
    first of :data:`PATHS` whose declaration (:func:`declarations`) accepts it. Every decoding entry
    point (``generate`` and ``generate_stream``, on the CPU and on a device) asks this function, and
    it only reads the declarations."""
    request = Request(model, options, rows, max_batch_size, callback, stream)
    answers = declarations(request)
    path = next(p for p in PATHS if answers[p] is None)
    declined = [f"{p}: {answers[p]}" for p in PATHS[:PATHS.index(path)]
                if not (p == DEVICE and getattr(model, "device", "cpu") == "cpu")]
    why = _what(path, request) + (f" (declined: {'; '.join(declined)})" if declined else "")
    return Choice(path, search_of(options), why)


def native(choice: Choice) -> bool:
    """Whether ``choice`` runs the native programs (the runner's or the native decode's)."""
    return choice.path in (RUNNER, NATIVE)
