"""Decoding options: one checked record for greedy, beam search and sampling."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DecodingOptions:
    """What :func:`seqjit.decoding.generate` does; every field is checked by :meth:`validate`.

    - ``max_length``: at most this many generated tokens (the end token included).
    - ``min_length``: the end token is forbidden while fewer tokens than this have been generated.
    - ``beam_size`` / ``num_hypotheses``: beam width and the n-best kept per source (<= beam_size).
    - ``length_penalty``: beam scores are sum(log p) / length ** length_penalty (as ``transformers``).
    - ``repetition_penalty``: scores of tokens already in the hypothesis are divided by it (or
      multiplied, when negative), as ``transformers``' RepetitionPenaltyLogitsProcessor.
    - ``no_repeat_ngram_size``: an n-gram never occurs twice in a hypothesis (start token included).
    - ``sampling_topk``: 1 is greedy (argmax); 0 samples from the whole distribution; k > 1 samples
      among the k best. ``sampling_topp`` (nucleus) and ``sampling_temperature`` apply when sampling.
    - ``seed``: seeds the sampler (numpy Generator) for reproducible sampling.
    """

    max_length: int = 256
    min_length: int = 0
    beam_size: int = 1
    num_hypotheses: int = 1
    length_penalty: float = 1.0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    sampling_topk: int = 1
    sampling_topp: float = 1.0
    sampling_temperature: float = 1.0
    seed: int | None = None
    return_scores: bool = False
    return_attention: bool = False

    @property
    def sampling(self) -> bool:
        return self.sampling_topk != 1

    def validate(self) -> "DecodingOptions":
        def integer(name, low):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

        integer("max_length", 1)
        integer("min_length", 0)
        integer("beam_size", 1)
        integer("num_hypotheses", 1)
        integer("no_repeat_ngram_size", 0)
        integer("sampling_topk", 0)
        if self.min_length > self.max_length:
            raise ValueError(f"min_length ({self.min_length}) must not exceed max_length ({self.max_length})")
        if self.num_hypotheses > self.beam_size:
            raise ValueError(f"num_hypotheses ({self.num_hypotheses}) must not exceed beam_size ({self.beam_size})")
        if self.beam_size > 1 and self.sampling:
            raise ValueError("sampling_topk != 1 (sampling) cannot be combined with beam_size > 1")
        for name in ("repetition_penalty", "sampling_temperature"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not isinstance(self.length_penalty, (int, float)):
            raise ValueError(f"length_penalty must be a number, got {self.length_penalty!r}")
        if not isinstance(self.sampling_topp, (int, float)) or not 0 < self.sampling_topp <= 1:
            raise ValueError(f"sampling_topp must be in (0, 1], got {self.sampling_topp!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {self.seed!r}")
        return self
