"""The model-dependent limits on ``max_length``, checked before decoding allocates anything.

- A model with a position table (a Transformer with ``positions`` "sinusoidal" or "learned") decodes
  at most ``max_positions`` tokens. A ``max_length`` the caller gave above that is refused with a
  ValueError; the default (256) is lowered to it silently, as the CLI does. RNN models (and
  Transformers with ``positions`` "none" or "relative", T5) have no such limit.
- The decoder state that ``max_length`` asks for (a Transformer's KV cache grows with it) must fit in
  this machine's memory: a larger request is refused up front instead of failing (or swapping) later.

The model-independent ceiling (:data:`~seqjit.decoding.options.MAX_LENGTH_LIMIT`) is checked by
:meth:`DecodingOptions.validate <seqjit.decoding.options.DecodingOptions.validate>`.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os

import numpy as np

from .options import DecodingOptions


def target_positions(model) -> int | None:
    """The most tokens ``model`` can decode (its position table's size); None when unlimited."""
    config = model.config
    if getattr(config, "positions", "none") in ("none", "relative"):  # relative (T5): any length
        return None
    return getattr(config, "max_positions", None)


@functools.lru_cache(maxsize=1)
def physical_memory() -> int | None:
    """This machine's memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_max_length(model, options: DecodingOptions, *, explicit: bool, rows: int) -> DecodingOptions:
    """``options`` with ``max_length`` checked against ``model`` for a decode of ``rows`` state rows
    (batch x beam); lowered to the model's positions when it was not given (``explicit`` False)."""
    limit = target_positions(model)
    if limit is not None and options.max_length > limit:
        if explicit:
            raise ValueError(f"max_length {options.max_length} exceeds the model's {limit} positions (max_positions)")
        options = dataclasses.replace(options, max_length=limit).validate()
    specs = model.decoder_state_specs(1, options.max_length)
    state_bytes = rows * sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in specs.values())
    memory = physical_memory()
    if memory is not None and state_bytes > memory:
        raise ValueError(f"max_length {options.max_length} needs {state_bytes / 2**30:.1f} GiB of decoder state for "
                         f"{rows} rows (batch x beam), more than this machine's {memory / 2**30:.1f} GiB: "
                         "lower max_length, max_batch_size or beam_size")
    return options
