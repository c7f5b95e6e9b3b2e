"""Phoneme and word error rates of G2P predictions against dictionaries with several pronunciations.

Per word, the reference is the listed pronunciation closest to the prediction (fewest edits).
PER = sum of those edit distances / sum of those references' lengths; WER = share of words whose
prediction matches none of the listed pronunciations exactly.
"""
from __future__ import annotations

from dataclasses import dataclass


def edit_distance(a, b) -> int:
    """Levenshtein distance between two sequences (insertions, deletions, substitutions cost 1)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def closest(prediction, references) -> tuple[int, int]:
    """(edits, reference length) of the reference closest to ``prediction``."""
    if not references:
        raise ValueError("references: a word needs at least one pronunciation")
    return min((edit_distance(prediction, r), len(r)) for r in references)


@dataclass
class ErrorRates:
    words: int = 0
    wrong_words: int = 0
    edits: int = 0
    phonemes: int = 0

    def add(self, prediction, references) -> None:
        edits, length = closest(list(prediction), [list(r) for r in references])
        self.words += 1
        self.wrong_words += edits > 0
        self.edits += edits
        self.phonemes += length

    @property
    def wer(self) -> float:
        return self.wrong_words / self.words if self.words else 0.0

    @property
    def per(self) -> float:
        return self.edits / self.phonemes if self.phonemes else 0.0


def error_rates(predictions, references) -> ErrorRates:
    """:class:`ErrorRates` of parallel lists (one prediction, a list of pronunciations per word)."""
    if len(predictions) != len(references):
        raise ValueError(f"predictions ({len(predictions)}) and references ({len(references)}) differ in length")
    rates = ErrorRates()
    for p, refs in zip(predictions, references):
        rates.add(p, refs)
    return rates
