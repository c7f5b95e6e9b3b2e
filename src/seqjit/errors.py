"""Typed errors raised by seqjit outside the kernels (kernels raise plain TypeError/ValueError, and
:class:`KernelUnavailable` when a backend cannot run). The bottom layer: imports nothing of seqjit."""
from __future__ import annotations


class ModelFormatError(ValueError):
    """A model directory or file is missing, unreadable, truncated, corrupted, or does not match the
    architecture's declared weights. The message names the file and what was expected."""


class ConfigError(ValueError):
    """A model configuration holds an unknown key, a missing key, a value of the wrong kind, or a value
    outside its range (a non-finite float, a size past the limits of :mod:`seqjit.models.config`)."""


class GraphError(ValueError):
    """A graph is malformed: undefined or doubly defined value, cycle, unknown op or attribute."""


class ShapeError(ValueError):
    """Inputs given to a graph (or a node's inputs) do not have the shapes or dtypes it needs."""


class ModelConfigError(ModelFormatError, ConfigError):
    """A model directory's ``config.json`` holds a bad value: both a :class:`ConfigError` (which key is
    wrong and why) and a :class:`ModelFormatError` (the directory cannot be loaded); the message names
    the file."""


class UnknownOptionError(TypeError):
    """``generate`` was given a keyword argument that is not one of its options (a ``TypeError``, as
    Python's own for an unexpected keyword). The message names, for each, the seqjit option it
    probably means (a Hugging Face ``generate`` name, or a close spelling), or says that seqjit has no
    equivalent, then the known options."""


class NonFiniteLogits(ValueError):
    """A decoding step's logits hold NaN (the model's weights or activations overflowed float32): no
    token can be chosen, and picking one anyway (the first index, often the padding token) would
    return a wrong answer silently. The message names the step and the row. (+inf is not an error:
    it is read as probability one.)"""

    @classmethod
    def at(cls, step: int, row: int) -> "NonFiniteLogits":
        """The error for row ``row`` of decoding step ``step`` (every decoding loop, Python or native)."""
        return cls(f"decoding step {step}: the logits of row {row} hold NaN (the model's weights or "
                   "activations overflow float32); no token can be chosen")


class NothingGenerable(ValueError):
    """The decoding options leave no token to generate: every token id is banned (suppressed, a
    one-token bad word, the padding token, the end token before ``min_length``, the first step's
    ``begin_suppress_tokens``), or a step's processed scores are -inf for every token (an n-gram
    ban or a bad-word sequence on top of those). Picking one anyway would return a banned token
    (the padding id, scored NaN) as if it were an answer. Raised before decoding when the options
    alone decide it, else at the step; the message names the options."""

    #: the options that ban tokens, named by the message of a step that has none left
    OPTIONS = ("suppress_tokens, begin_suppress_tokens, bad_words_ids, suppress_pad_token, min_length, "
               "no_repeat_ngram_size")

    @classmethod
    def at(cls, step: int, row: int) -> "NothingGenerable":
        """The error for row ``row`` of decoding step ``step`` (every decoding loop, Python or native;
        a beam search's row is its source)."""
        return cls(f"decoding step {step}: row {row} has no token left to generate (every score is -inf after "
                   f"the options that ban tokens: {cls.OPTIONS}); loosen them")


class MemoryBudgetExceeded(ValueError):
    """A decode would allocate more than the memory available now (or the limit set with
    :func:`seqjit.decoding.limits.set_memory_limit`). Checked before anything is allocated; the
    message gives the bytes by part (state, token, beam and attention buffers, logits) and the
    options to lower."""


class ChecksumWarning(UserWarning):
    """A weights file carries no per-tensor checksums, so a corrupted data region cannot be detected.
    seqjit's own ``save`` always writes them; re-save the model with seqjit to add them."""


class KernelUnavailable(RuntimeError):
    """The requested backend of a kernel cannot be used here (not built, or no GPU). Also
    :class:`seqjit.kernels.KernelUnavailable`: defined here, the bottom layer, so that both the kernels
    and the errors above them derive from it without importing upward."""


class CudaUnavailable(KernelUnavailable):
    """The GPU was asked for (the ``cuda`` kernel backend, or a model on ``device="cuda"``) but cannot
    be used here. The message names what is missing: the numba-cuda package, the NVIDIA driver, a
    visible GPU, or the CUDA toolkit's NVVM; and how to run on numba's CUDA simulator instead
    (``NUMBA_ENABLE_CUDASIM=1`` set before numba.cuda is first imported). A
    :class:`seqjit.kernels.KernelUnavailable` (a RuntimeError), so code that falls back from any
    unavailable backend catches it too."""


class DeviceOutOfMemory(MemoryError):
    """A device array could not be allocated: the GPU's memory is full. The message names the array
    (its shape, dtype and size) and what to try (a smaller batch or beam, fewer models on the GPU)."""


class LexiconError(ValueError):
    """A pronunciation lexicon cannot be used: the file is missing or unreadable, not UTF-8, or a line is
    malformed (no pronunciation after the word). The message names the file and the line."""


class InputError(ValueError):
    """An input of the text commands (``--input``, stdin) cannot be read as lines: it is a device or a
    socket (not a file, a FIFO or a pipe), or a line runs past the longest line read (a stream
    without line breaks, such as a FIFO fed from ``/dev/zero``). The message names the input and,
    for a line, its number (``FILE:LINE``)."""


class SourceTooLong(ValueError):
    """A source is longer than the ``max_input_length`` of a decoding call (without
    ``truncate_input``); the message names the source (its index) and both lengths."""
