"""The decode spec: a call's options resolved once, with the model's rules, into the plain record
every decoding loop reads by name (Python, native, runner, device).

:func:`decode_spec` takes the checked :class:`~seqjit.decoding.options.DecodingOptions` of a call
(after :func:`~seqjit.decoding.inputs.resolve_rules`), checks ``max_length`` against the model and
the memory available (:mod:`~seqjit.decoding.limits`), and adds what the loops derive from the
model: the search, the end and start tokens, the tokens never generated (a tuple and the sorted
int64 array the native loops take) and the sampling seed. A :class:`DecodeSpec` is a
``DecodingOptions`` (the same fields, names and checks) plus those fields, so a loop written
against the options reads the spec unchanged.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from .inputs import MAX_CHECKED, suppressed_tokens, with_seed
from .limits import check_budget, checked_length, decode_bytes
from .options import DecodingOptions

SEARCHES = ("greedy", "sampling", "beam")


@dataclasses.dataclass(frozen=True)
class DecodeSpec(DecodingOptions):
    """:class:`DecodingOptions` resolved for one model and call (see the module docstring)."""

    #: ``greedy``, ``sampling`` or ``beam``
    search: str = "greedy"
    #: the model's end token and the decoder's first input
    eos_id: int = 0
    start_id: int = 0
    #: tokens never generated (:func:`~seqjit.decoding.inputs.suppressed_tokens`), sorted
    suppressed: tuple = ()
    #: the same as a sorted int64 array (what the native loops read)
    banned: np.ndarray = dataclasses.field(default=None, compare=False, hash=False, repr=False)


def search_of(options) -> str:
    """``beam``, ``sampling`` or ``greedy``: what ``options`` (checked) ask for."""
    return "beam" if options.beam_size > 1 else "sampling" if options.sampling else "greedy"


def resolve(model, opts: DecodingOptions) -> DecodeSpec:
    """``opts`` (checked, the model's rules resolved, ``max_length`` checked) as the model's spec."""
    suppressed = suppressed_tokens(model, opts)
    fields = {f.name: getattr(opts, f.name) for f in dataclasses.fields(DecodingOptions)}
    return DecodeSpec(**fields, search=search_of(opts), eos_id=int(model.eos_id),
                      start_id=int(model.decoder_start_id), suppressed=suppressed,
                      banned=np.array(suppressed, np.int64))


def decode_spec(model, opts: DecodingOptions, *, explicit: bool, rows: int, width: int) -> DecodeSpec:
    """The spec of a call with options ``opts`` (``explicit``: the caller gave ``max_length``) decoding
    ``rows`` state rows at a time (sources x beams) of sources ``width`` tokens wide: remembered per
    model for those arguments; the memory budget checked every call (what is available changes), and
    a fresh seed drawn per call when sampling without one."""
    cache = model.__dict__.setdefault("_decode_specs", {})
    key = (opts, explicit, rows, width)
    checked = cache.get(key)
    if checked is None:
        options = checked_length(model, opts, explicit=explicit)
        checked = (resolve(model, options), decode_bytes(model, options, rows, width))
        if len(cache) >= MAX_CHECKED:
            cache.clear()
        cache[key] = checked
    check_budget(checked[1], rows, checked[0])
    return with_seed(checked[0])


class Request(NamedTuple):
    """What a path's declaration (``supports(request) -> reason | None``) is asked about: the model,
    the options (a :class:`DecodeSpec` or checked :class:`DecodingOptions`), how many sources the
    call decodes in batches of at most ``max_batch_size``, its per-token ``callback`` and whether it
    streams one source (``generate_stream``)."""

    model: object
    options: DecodingOptions
    rows: int
    max_batch_size: int = 64
    callback: object = None
    stream: bool = False
