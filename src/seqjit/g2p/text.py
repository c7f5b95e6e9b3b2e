"""Sentences to phonemes: text cut into sentences and words, numbers read aloud, each word pronounced.

    from seqjit.g2p import G2P
    sentences = G2P(lexicon="cmudict").read_text("In 1984, I paid $2.50 for my 3rd well-known book.")
    sentences[0].line()        # 'IH0 N | N AY1 N T IY1 N | ... | .'  (words apart by ' | ')
    sentences[0].words[1]      # Token('1984', spoken=['nineteen', 'eighty', 'four'], pronunciations=[...])

Rules, in the order they are tried at each position of the text:

- currency ``$2.50``, ``£3``, ``€1,000``; percentages ``50%``; ordinals ``3rd``; numbers ``1,250``,
  ``3.14``, with years (four digits 1100-2099) read as years: words from :mod:`seqjit.g2p.numbers`;
- initialisms ``U.S.``, ``e.g.``: the whole, else letter by letter;
- words of letters with inner apostrophes or hyphens (``don't``, ``students'``, ``well-known``): a
  hyphenated word is looked up whole in the lexicon, else read part by part; ``’`` counts as ``'``;
  ``Mr.``, ``Dr.`` and a few other abbreviations are read in full (``mister``), their period kept
  out of the sentence's end;
- anything else that is not white space (``,``, ``!``, ``"``, ``...``) is punctuation: it separates
  words, is kept in the output, and ``.``, ``!``, ``?`` end a sentence.

One line per sentence: each spoken word's phonemes separated by spaces, the words and the
punctuation separated by :data:`BOUNDARY`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from seqjit.g2p.numbers import spoken as spoken_number

BOUNDARY = " | "
#: abbreviations read in full (written with a period, which then ends no sentence)
ABBREVIATIONS = {"mr": "mister", "mrs": "missus", "ms": "miz", "dr": "doctor", "prof": "professor", "jr": "junior",
                 "sr": "senior", "vs": "versus", "etc": "etcetera", "mt": "mount"}
_LETTERS = r"[^\W\d_]"
TOKEN = re.compile(
    rf"(?P<number>[$£€]\s?\d+(?:,\d{{3}})*(?:\.\d+)?|\d+(?:st|nd|rd|th)\b|\d+(?:,\d{{3}})*(?:\.\d+)?%?)"
    rf"|(?P<initialism>(?:{_LETTERS}\.){{2,}})"
    rf"|(?P<word>{_LETTERS}+(?:['’\-]{_LETTERS}+)*(?:['’](?!{_LETTERS}))?)"
    rf"|(?P<punctuation>[^\w\s]+|_+)",
    re.IGNORECASE)
SENTENCE_END = re.compile(r"[.!?]")


@dataclass
class Token:
    """One written token: ``text`` as written; ``kind``: word, number, initialism or punctuation;
    ``spoken``: the words read aloud (none for punctuation); ``pronunciations``: one
    :class:`~seqjit.g2p.predictor.Pronunciation` per spoken word (filled by :func:`read_text`)."""

    text: str
    kind: str
    spoken: list = field(default_factory=list)
    pronunciations: list = field(default_factory=list)

    @property
    def phonemes(self) -> list:
        """The phonemes of each spoken word."""
        return [p.phonemes for p in self.pronunciations]


@dataclass
class Sentence:
    text: str
    tokens: list = field(default_factory=list)

    @property
    def words(self) -> list:
        """The tokens read aloud (punctuation left out)."""
        return [t for t in self.tokens if t.kind != "punctuation"]

    def line(self, boundary: str = BOUNDARY) -> str:
        """The sentence's phonemes: words (and punctuation marks) separated by ``boundary``."""
        parts = []
        for token in self.tokens:
            if token.kind == "punctuation":
                parts.append(token.text)
            else:
                parts += [" ".join(p.phonemes) for p in token.pronunciations]
        return boundary.join(parts)


def sentences(text: str) -> list:
    """``text`` cut into :class:`Sentence` of :class:`Token` (``spoken`` filled; not yet pronounced)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    out, current, start, skip_period = [], [], None, False
    matches = list(TOKEN.finditer(text))
    for m in matches:
        kind, written = m.lastgroup, m.group()
        if kind == "punctuation" and skip_period and written.startswith("."):
            skip_period, written = False, written[1:]  # Dr. -> doctor: the period is part of the word
            if not written:
                continue
        skip_period = False
        if start is None:
            start = m.start()
        token = Token(written, kind)
        if kind == "number":
            token.spoken = spoken_number(written.replace(" ", ""))
        elif kind == "word":
            full = ABBREVIATIONS.get(written.lower())
            follows = text[m.end():m.end() + 1]
            if full is not None and follows == ".":
                token.spoken, skip_period = [full], True
            else:
                token.spoken = [written.replace("’", "'")]
        elif kind == "initialism":
            token.spoken = [written]
        current.append(token)
        if kind == "punctuation" and SENTENCE_END.search(written):
            out.append(Sentence(text[start:m.end()].strip(), current))
            current, start = [], None
    if current:
        out.append(Sentence(text[start:].strip(), current))
    return out


def _pieces(word: str, kind: str, lexicon) -> list:
    """What the model reads for one spoken word: the whole when the lexicon holds it, else a
    hyphenated word part by part and an initialism letter by letter."""
    if lexicon is not None and lexicon.lookup(word) is not None:
        return [word]
    if kind == "initialism":
        return [c for c in word if c != "."]
    return [part for part in word.split("-") if part] or [word]


def read_text(g2p, text: str, **predict_options) -> list:
    """:class:`Sentence` of ``text`` with every token pronounced by ``g2p`` (lexicon first, when it
    has one); ``predict_options`` go to :meth:`seqjit.g2p.G2P.predict` (beam size, ...)."""
    out = sentences(text)
    plan = []  # (token, pieces)
    for sentence in out:
        for token in sentence.tokens:
            if token.kind == "punctuation":
                continue
            pieces = []
            for word in token.spoken:
                pieces += _pieces(word, token.kind, g2p.lexicon)
            token.spoken = pieces
            plan.append(token)
    words = [w for token in plan for w in token.spoken]
    results = iter(g2p.predict(words, **predict_options) if words else [])
    for token in plan:
        token.pronunciations = [next(results) for _ in token.spoken]
    return out


def sentence_json(sentence: Sentence) -> dict:
    """A sentence as JSON data: its text, its line, and each token with its spoken words, their
    phonemes and which answered (``source``: lexicon or model)."""
    tokens = []
    for t in sentence.tokens:
        words = [{"word": w, "phonemes": p.phonemes, "source": p.source} for w, p in zip(t.spoken, t.pronunciations)]
        tokens.append({"text": t.text, "kind": t.kind, "words": words})
    return {"sentence": sentence.text, "phonemes": sentence.line(), "tokens": tokens}
