"""Checking that a file is a SentencePiece model before ``seqjit convert`` copies it into a model
directory (:mod:`seqjit.convert.toolkit_vocab`): read as model files are (a regular file of bounded
size), then loaded by sentencepiece when it is installed, else parsed as a protobuf message (the
``ModelProto`` its pieces are in), so a file that is not one is refused by name instead of copied.
"""
from __future__ import annotations

from pathlib import Path

from seqjit.errors import ModelFormatError
from seqjit.models.files import read_limited

#: the largest SentencePiece model copied; a Marian model's is under 1 MiB
SPM_MAX_BYTES = 64 << 20


def _varint(raw: bytes, at: int) -> tuple:
    value = shift = 0
    while at < len(raw) and shift < 64:
        byte = raw[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at
    raise ValueError("a truncated or overlong varint")


def _protobuf_fields(raw: bytes) -> list:
    """The top-level fields of a protobuf message as (number, wire type, payload of a length-delimited
    field or None), each field's extent checked (ValueError else)."""
    fields, at = [], 0
    while at < len(raw):
        key, at = _varint(raw, at)
        number, wire, payload = key >> 3, key & 7, None
        if wire == 0:
            _, at = _varint(raw, at)
        elif wire == 2:
            length, at = _varint(raw, at)
            payload, at = raw[at:at + length], at + length
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"field {number} has wire type {wire}")
        if number == 0 or at > len(raw):
            raise ValueError("a field runs past the end" if number else "field number 0")
        fields.append((number, wire, payload))
    return fields


def check_spm_model(raw: bytes, where) -> None:
    """A ModelFormatError naming ``where`` unless ``raw`` is a SentencePiece model: loaded by
    sentencepiece when it is installed, else checked as a ``ModelProto``: a well-formed protobuf
    message whose pieces (field 1, messages each holding a piece string, field 1) are well formed."""
    if not raw:
        raise ModelFormatError(f"{where} is empty, not a SentencePiece model")
    try:
        import sentencepiece
    except ModuleNotFoundError:
        try:
            pieces = [payload for number, wire, payload in _protobuf_fields(raw) if number == 1]
            if not pieces or None in pieces:
                raise ValueError("it lists no pieces")
            for piece in pieces:
                if not any(n == 1 and w == 2 for n, w, _ in _protobuf_fields(piece)):
                    raise ValueError("a piece without its string")
        except ValueError as exc:
            raise ModelFormatError(f"{where} is not a SentencePiece model ({exc})") from None
        return
    try:
        sentencepiece.SentencePieceProcessor(model_proto=raw)
    except (OSError, RuntimeError, ValueError, TypeError) as exc:
        raise ModelFormatError(f"{where} is not a readable SentencePiece model: {str(exc)[:200]}") from None


def spm_model(path, where: str) -> bytes:
    """The bytes of SentencePiece model ``path`` (a regular file of at most SPM_MAX_BYTES that loads
    as one: :func:`check_spm_model`); ``where``: the option or flag that named it, for messages."""
    raw = read_limited(Path(path), SPM_MAX_BYTES)
    check_spm_model(raw, f"{where} ({path})")
    return raw


__all__ = ["SPM_MAX_BYTES", "check_spm_model", "spm_model"]
