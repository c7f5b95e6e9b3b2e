"""What decoding returns and streams."""
from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class GenerationResult:
    """One source's result: ``ids`` is the n-best list of token-id lists (end token excluded),
    best first; ``scores`` the matching scores (greedy and sampling: the sum of the chosen tokens'
    log-probabilities; beam search: that sum / length ** length_penalty); ``attention`` (when asked)
    one array per hypothesis, ``[steps, ...]``: the attention over the source at every output step,
    source axis last. ``truncated``: the source was cut to ``max_input_length`` tokens
    (``truncate_input``) before decoding."""

    ids: list
    scores: list | None = None
    attention: list | None = None
    truncated: bool = False


@dataclasses.dataclass
class StepToken:
    """A streamed token: which source (its index in the batch), the token, its log-probability,
    and whether the source's decoding is finished (``is_last``)."""

    batch_index: int
    token: int
    log_prob: float
    step: int
    is_last: bool


def empty_attention_history(rows: int, max_length: int, shape: tuple) -> np.ndarray:
    return np.zeros((rows, max_length) + tuple(shape), np.float32)
