"""SentencePiece model files of a model directory: found (:func:`tokenizer_file`) and read
(:func:`spm_processor`) as model files are (:mod:`seqjit.models.files`: regular files inside the
directory, of bounded size), handed to sentencepiece as bytes. Used by the Marian-layout codec
(:mod:`seqjit.text.translation`) and the toolkit token-list codec (:mod:`seqjit.text.word_vocab`).
"""
from __future__ import annotations

import os
from pathlib import Path

from seqjit.errors import ModelFormatError
from seqjit.models.files import model_file, read_limited

SPM_HINT = "pip install sentencepiece"
#: the largest source.spm / target.spm read; a Marian model's is under 1 MiB
SPM_MAX_BYTES = 64 << 20


def import_sentencepiece(why: str):
    try:
        import sentencepiece
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"{why} needs the sentencepiece package: {SPM_HINT}") from None
    return sentencepiece


def tokenizer_file(directory: Path, name: str):
    """``directory / name`` when present (a dangling link or a FIFO counts: reading it is refused
    then, rather than the file being silently ignored); None when absent. Refused when it leaves
    the model directory."""
    path = model_file(directory, name)
    return path if os.path.lexists(path) else None


def spm_processor(path: Path):
    """A SentencePiece processor of the model file ``path`` (read as a model file is, handed over as
    bytes: sentencepiece would open any path)."""
    spm = import_sentencepiece(f"{path.parent} has SentencePiece files (use --ids to read token ids instead); text")
    proto = read_limited(path, SPM_MAX_BYTES)
    if not proto:
        raise ModelFormatError(f"{path} is empty, not a SentencePiece model")
    try:
        return spm.SentencePieceProcessor(model_proto=proto)
    except (OSError, RuntimeError) as exc:
        raise ModelFormatError(f"{path} is not a readable SentencePiece model: {exc}") from None
