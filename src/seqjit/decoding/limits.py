"""The model-dependent limits on ``max_length``, checked before decoding allocates anything.

- A model with a position table (a Transformer with ``positions`` "sinusoidal" or "learned") decodes
  at most ``max_positions`` tokens. A ``max_length`` the caller gave above that is refused with a
  ValueError; the default (256) is lowered to it silently, as the CLI does. RNN models (and
  Transformers with ``positions`` "none" or "relative", T5) have no such limit.
- Everything a decode allocates (:func:`decode_bytes`: decoder and encoder state, token buffers,
  beam and n-best buffers, attention buffers, logits and their working copies) must fit in the
  memory available now (``MemAvailable``) and under the cap of :func:`set_memory_limit`: a larger
  request raises :class:`~seqjit.errors.MemoryBudgetExceeded` up front, naming the options to
  lower, instead of failing (or swapping) later.

The model-independent ceiling (:data:`~seqjit.decoding.options.MAX_LENGTH_LIMIT`) is checked by
:meth:`DecodingOptions.validate <seqjit.decoding.options.DecodingOptions.validate>`.
"""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from seqjit.errors import MemoryBudgetExceeded

from .options import DecodingOptions


def target_positions(model) -> int | None:
    """The most tokens ``model`` can decode (its position table's size); None when unlimited."""
    config = model.config
    if getattr(config, "positions", "none") in ("none", "relative"):  # relative (T5): any length
        return None
    return getattr(config, "max_positions", None)


#: bytes per logit element a step keeps alive at its peak: the model's float32 logits plus the working
#: copies of each mode (greedy: a processed copy; sampling: float64 tempered, sorted, softmax and
#: cumulative arrays; beam: log-softmax, totals over K x V, their argsort indices)
_LOGIT_BYTES = {"greedy": 12, "sampling": 40, "beam": 28}
#: token-id arrays of ``rows x max_length`` int64 alive at a step's peak: greedy the history and its
#: extended copy; beam the running and finished histories, the new and candidate (2K) ones, the
#: merged (3K) ones, the step's history
_TOKEN_ARRAYS = {"greedy": 2, "sampling": 2, "beam": 9}
#: attention arrays of ``rows x max_length x (one step's attention)`` float32 (greedy: the per-step
#: copies and their stack; beam: running, finished, candidate (2K) and merged (3K) buffers)
_ATTENTION_ARRAYS = {"greedy": 2, "sampling": 2, "beam": 7}
#: a request below this many bytes is not checked against MemAvailable (reading it costs more than
#: the request risks); a limit set with :func:`set_memory_limit` is checked whatever the size
SMALL_REQUEST = 64 << 20

_memory_limit: int | None = None


def set_memory_limit(limit: int | None) -> None:
    """Refuse any decode that would allocate more than ``limit`` bytes (None: only what is
    available limits it)."""
    global _memory_limit
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"the memory limit must be a positive number of bytes or None, got {limit!r}")
    _memory_limit = limit


def available_memory() -> int | None:
    """Bytes this machine can give now without swapping: ``MemAvailable`` of /proc/meminfo, else the
    free physical pages; None where the OS does not say."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _mode(options: DecodingOptions) -> str:
    return "beam" if options.beam_size > 1 else "sampling" if options.sampling else "greedy"


def _encoder_row_bytes(config, source_length: int, itemsize: int) -> int:
    """The encoder state of one row: a Transformer's memory and cross-attention keys and values per
    decoder layer; an RNN's memory (both directions)."""
    if hasattr(config, "d_model"):
        return (1 + 2 * config.decoder_layers) * source_length * config.d_model * itemsize
    width = getattr(config, "hidden_size", 0) * (2 if getattr(config, "bidirectional", False) else 1)
    return source_length * width * itemsize


def _attention_per_step(config, source_length: int) -> int:
    """Elements of one row's attention at one step: [layers, heads, S] (Transformer) or [S]."""
    if hasattr(config, "decoder_heads"):
        return config.decoder_layers * config.decoder_heads * source_length
    return source_length


def decode_bytes(model, options: DecodingOptions, rows: int, source_length: int = 1) -> dict:
    """What decoding ``rows`` state rows (batch x beam) of sources of ``source_length`` tokens with
    ``options`` allocates at its peak, in bytes, by part (see the tables above)."""
    mode, length = _mode(options), options.max_length
    itemsize = np.dtype(getattr(model.config, "dtype", "float32")).itemsize
    specs = model.decoder_state_specs(1, length)
    state = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in specs.values())
    state += _encoder_row_bytes(model.config, source_length, itemsize)
    parts = {
        "decoder state": rows * state * (2 if mode == "beam" else 1),  # beam: reordered copies
        "token buffers": rows * length * 8 * _TOKEN_ARRAYS[mode],
        "logits": rows * (getattr(model, "target_vocab_size", None) or 0) * _LOGIT_BYTES[mode],
    }
    if options.return_attention:
        parts["attention buffers"] = rows * length * _attention_per_step(model.config, source_length) * 4 \
            * _ATTENTION_ARRAYS[mode]
    if mode == "beam":
        parts["n-best"] = rows // options.beam_size * options.num_hypotheses * length * 8
    return parts


def check_budget(parts: dict, rows: int, options: DecodingOptions) -> None:
    """:class:`MemoryBudgetExceeded` when ``parts`` (from :func:`decode_bytes`) add up to more than
    the memory available now or the limit set, naming the largest parts and what to lower."""
    need = sum(parts.values())
    limit, what = _memory_limit, "the memory limit set (seqjit.decoding.limits.set_memory_limit)"
    if need >= SMALL_REQUEST or limit is not None:
        available = available_memory()
        if available is not None and (limit is None or available < limit):
            limit, what = available, "the memory available now (MemAvailable)"
    if limit is None or need <= limit:
        return
    shown = ", ".join(f"{name} {size / 2**30:.2f}" for name, size in sorted(parts.items(), key=lambda p: -p[1]) if size)
    lower = ["max_length", "max_batch_size"] + (["beam_size"] if options.beam_size > 1 else []) \
        + (["num_hypotheses"] if options.num_hypotheses > 1 else []) \
        + (["return_attention=False"] if options.return_attention else [])
    raise MemoryBudgetExceeded(
        f"decoding {rows} rows (batch x beam) at max_length {options.max_length} needs {need / 2**30:.2f} GiB "
        f"({shown} GiB), more than {what}: {limit / 2**30:.2f} GiB; lower {', '.join(lower)}")


def checked_length(model, options: DecodingOptions, *, explicit: bool) -> DecodingOptions:
    """``options`` with ``max_length`` checked against the model's positions; lowered to them when it
    was not given (``explicit`` False)."""
    limit = target_positions(model)
    if limit is not None and options.max_length > limit:
        if explicit:
            raise ValueError(f"max_length {options.max_length} exceeds the model's {limit} positions (max_positions)")
        options = dataclasses.replace(options, max_length=limit).validate()
    return options


def check_max_length(model, options: DecodingOptions, *, explicit: bool, rows: int,
                     source_length: int = 1) -> DecodingOptions:
    """:func:`checked_length`, then :func:`check_budget` for a decode of ``rows`` state rows (batch x
    beam) of sources of ``source_length`` tokens."""
    options = checked_length(model, options, explicit=explicit)
    check_budget(decode_bytes(model, options, rows, source_length), rows, options)
    return options
