"""The line rules of the text commands and the Ray predictors: which line of token ids, text or word
can be decoded, and why another cannot (the message a ``seqjit: FILE:LINE:`` report or an ``error``
column carries).

Lines come as ``(number, text, error)`` (:func:`seqjit.text.batching.read_lines`); the rules give
records (:class:`~seqjit.text.batching.Record`), an unusable line's with its ``error`` set.
"""
from __future__ import annotations

from seqjit.text.batching import Record

#: the most characters of an input a message quotes: a 100,000-character line must not become a
#: 100,000-character message
QUOTE_LIMIT = 80


def quoted(text, limit: int = QUOTE_LIMIT) -> str:
    """``repr(text)``, of at most ``limit`` characters of ``text`` (then ``...`` and its length)."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


BLANK = ""  # Record.error for a blank text line: emitted as a blank line, not reported


def parse_ids(text: str) -> list:
    """The token ids of a line of space-separated plain decimal ids, or ValueError saying which token is wrong."""
    tokens = text.split()
    if not tokens:
        raise ValueError("empty line: expected space-separated token ids")
    ids = []
    for position, token in enumerate(tokens, 1):
        # plain ASCII decimal only: int() would also take '1_0', '+5' and other scripts' digits
        if not (token.isascii() and token.isdigit()):
            raise ValueError(f"token {position} ({quoted(token)}) is not a token id (plain decimal digits 0-9)")
        digits = token.lstrip("0") or "0"
        if len(digits) > 18:  # past any vocabulary (and int64)
            raise ValueError(f"token {position} ({quoted(token)}) is too large for a token id")
        ids.append(int(digits))
    return ids


def check_source_line(ids: list, model, max_positions) -> None:
    """ValueError when a source's ids lie outside ``model``'s source vocabulary or outnumber its
    positions (``max_positions``; None: no limit)."""
    vocab = model.source_vocab_size
    if vocab is not None:
        for position, value in enumerate(ids, 1):
            if not 0 <= value < vocab:
                raise ValueError(f"token id {value} (token {position}) is outside the source vocabulary [0, {vocab})")
    if max_positions is not None and len(ids) > max_positions:
        raise ValueError(f"the source has {len(ids)} tokens, more than the model's max_positions ({max_positions})")


def line_records(lines, model, codec, max_positions):
    """The line rules of ``seqjit translate`` over ``(number, text, error)`` lines: a blank line
    with a SentencePiece codec, ids that do not parse or lie outside the vocabulary, a source longer
    than the model's positions: an error record; else the source ids."""
    for number, text, error in lines:
        if error is None and codec is not None and not text.strip():
            yield Record(number - 1, number, error=BLANK)
            continue
        if error is None:
            try:
                ids = codec.encode(text) if codec is not None else parse_ids(text)
                check_source_line(ids, model, max_positions)
            except ValueError as exc:
                error = str(exc)
        if error is not None:
            yield Record(number - 1, number, error=error)
        else:
            yield Record(number - 1, number, item=ids, length=len(ids))


def resolve_max_length(max_length: int | None, max_positions: int | None) -> int:
    """``seqjit translate``'s rule: 256, or the model's max_positions when smaller; a larger
    explicit value is an error."""
    if max_length is None:
        return 256 if max_positions is None else min(256, max_positions)
    if max_positions is not None and max_length > max_positions:
        raise ValueError(f"--max-length {max_length} exceeds the model's max_positions ({max_positions})")
    return max_length


#: what ``str.splitlines`` cuts at: a word holding one would print as two output lines
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")


def word_records(lines, g2p):
    """The line rules of ``seqjit g2p`` over ``(number, text, error)`` lines: a line is read up to
    its first tab; an empty one, a word holding a line break, or one the model cannot spell (more
    letters than its positions): an error record."""
    for number, text, error in lines:
        word, length = None, 0
        if error is None:
            word = text.split("\t", 1)[0].strip()
            if any("\ud800" <= c <= "\udfff" for c in text):  # argv bytes that were not UTF-8 (surrogateescape)
                error, word = "not valid utf-8 text (an argument's bytes do not decode)", None
            elif any(c in LINE_BREAKS for c in word):
                error, word = "the word holds a line break (one word per line; its output line would split)", None
            elif not text.strip():
                error = "empty line (no word)"
            elif not word:
                error = "no word before the tab"
            else:
                try:
                    length = len(g2p.spell(word)[0])
                except ValueError as exc:
                    error = str(exc)
        yield Record(number - 1, number, word, length, error)
