"""The CMU Pronouncing Dictionary (from the ``cmudict`` package) and its fixed train/dev/test split.

Entries: lower-case words of the letters a-z and ``'``, ``-``, ``.``; pronunciations in ARPAbet with
stress digits (69 phoneme symbols). A word with several pronunciations (``word(2)``) keeps them
all, first listed first.

Split, by word, so that no pronunciation of a test word is seen in training:
``zlib.crc32(word.encode("utf-8")) % 100``: 0-89 train, 90-94 dev, 95-99 test (about 113k / 6.3k /
6.3k words of 126k). Training uses each word's first pronunciation; evaluation counts a word as
right when the prediction equals any of its pronunciations (see :mod:`seqjit.g2p.metrics`).
"""
from __future__ import annotations

import zlib
from functools import lru_cache

from seqjit.g2p.lexicon import dictionary_text
from seqjit.g2p.lexicon import parse as parse_lexicon

SPLITS = ("train", "dev", "test")
#: crc32 % 100 below the first bound: train; below the second: dev; else test
SPLIT_BOUNDS = (90, 95)


def split_of(word: str) -> str:
    bucket = zlib.crc32(word.encode("utf-8")) % 100
    return "train" if bucket < SPLIT_BOUNDS[0] else "dev" if bucket < SPLIT_BOUNDS[1] else "test"


def parse(text: str) -> dict:
    """``{word: [pronunciation, ...]}`` from cmudict.dict text; a pronunciation is a tuple of phonemes
    (the lexicon file format: :func:`seqjit.g2p.lexicon.parse`)."""
    return parse_lexicon(text, "cmudict.dict")


@lru_cache(maxsize=1)
def load_entries() -> dict:
    """Every word of the dictionary with its pronunciations."""
    return parse(dictionary_text())


def load_split(split: str) -> list:
    """``[(word, [pronunciation, ...]), ...]`` of ``split`` ("train", "dev" or "test"), sorted by word."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return sorted((w, p) for w, p in load_entries().items() if split_of(w) == split)
