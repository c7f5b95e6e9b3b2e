"""Symbol tables of a G2P model: graphemes (source) and phonemes (target) with the special tokens.

Ids 0-3 are ``<pad>``, ``<s>`` (decoder start), ``</s>`` (end) and ``<unk>`` on both sides; a
character outside the model's graphemes becomes ``<unk>`` and is reported, never dropped. With
``fold_accents`` a character the model does not know is first replaced by its accent-free form
(:func:`without_accents`: ``é`` -> ``e``); a character the model knows is never changed. A model
directory stores the tables in ``g2p.json`` beside ``config.json`` and ``model.safetensors``.
"""
from __future__ import annotations

import json
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from seqjit.errors import ModelFormatError
from seqjit.models.files import model_file, read_json, write_replacing

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
PAD, BOS, EOS, UNK = range(4)
G2P_FILE = "g2p.json"
#: the largest g2p.json read; the bundled ones are about 2 KiB
G2P_MAX_BYTES = 1 << 20


def without_accents(text: str) -> str:
    """``text`` without accents: Unicode NFKD, then combining marks removed (``é`` -> ``e``,
    ``ﬁ`` -> ``fi``); a character with no decomposition (``ß``, ``ø``) stays as it is."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@dataclass
class Vocab:
    graphemes: list
    phonemes: list
    info: dict = field(default_factory=dict)  # metrics and training facts, written by the trainer

    def __post_init__(self):
        self._src = {g: i + len(SPECIALS) for i, g in enumerate(self.graphemes)}

    @property
    def src_size(self) -> int:
        return len(SPECIALS) + len(self.graphemes)

    @property
    def tgt_size(self) -> int:
        return len(SPECIALS) + len(self.phonemes)

    def encode_word(self, word: str, *, fold_accents: bool = False) -> tuple[list, list]:
        """Source ids of ``word`` (lower-cased) and the characters that became ``<unk>``."""
        ids, unknown, _ = self.spell(word, fold_accents=fold_accents)
        return ids, unknown

    def spell(self, word: str, *, fold_accents: bool = True) -> tuple[list, list, str]:
        """Source ids of ``word`` (lower-cased), the characters that became ``<unk>``, and the text
        the ids spell: with ``fold_accents`` each character the model does not know is replaced by
        its accent-free form (``café`` reads as ``cafe``; a combining accent alone is dropped)."""
        ids, unknown, letters = [], [], []
        for ch in word.lower():
            pieces = ch if ch in self._src or not fold_accents else without_accents(ch)
            for piece in pieces:
                i = self._src.get(piece)
                if i is None:
                    unknown.append(piece)
                    i = UNK
                ids.append(i)
                letters.append(piece)
        return ids, unknown, "".join(letters)

    def phoneme_ids(self, phones) -> list:
        index = {p: i + len(SPECIALS) for i, p in enumerate(self.phonemes)}
        return [index[p] for p in phones]

    def decode(self, ids) -> list:
        """Phoneme symbols of target ids (specials other than ``<unk>`` are skipped)."""
        n = len(SPECIALS)
        return [self.phonemes[i - n] if i >= n else "<unk>" for i in ids if i >= n or i == UNK]

    def save(self, directory) -> None:
        data = {"graphemes": self.graphemes, "phonemes": self.phonemes, "specials": list(SPECIALS), **self.info}
        write_replacing(Path(directory) / G2P_FILE, json.dumps(data, indent=1) + "\n")  # a planted link is replaced

    @classmethod
    def load(cls, directory) -> "Vocab":
        """The tables in ``directory/g2p.json``, read as every model file is (:mod:`seqjit.models.files`):
        a regular file inside the directory, of at most :data:`G2P_MAX_BYTES`."""
        path = model_file(directory, G2P_FILE)
        if not os.path.lexists(path):
            raise ModelFormatError(f"{path}: missing; a G2P model directory holds {G2P_FILE} (its symbol tables)")
        data = read_json(path, max_bytes=G2P_MAX_BYTES)
        if not isinstance(data, dict) or data.get("specials") != list(SPECIALS):
            raise ModelFormatError(f"{path}: expected an object with specials {list(SPECIALS)}")
        for key in ("graphemes", "phonemes"):
            value = data.get(key)
            if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value) or len(set(value)) != len(value):
                raise ModelFormatError(f"{path}: {key!r} must be a list of distinct non-empty strings")
        # the TSV output joins phonemes with spaces, one word a line: a symbol holding white space
        # (a line break included) would shift its columns or split its line
        spaced = next((s for s in data["phonemes"] if any(c.isspace() for c in s)), None)
        if spaced is not None:
            raise ModelFormatError(f"{path}: phoneme symbol {spaced[:40]!r} holds white space or a line break")
        for key in ("graphemes", "phonemes"):  # JSON's \udcff escapes: not encodable as UTF-8 output
            odd = next((s for s in data[key] if any("\ud800" <= c <= "\udfff" for c in s)), None)
            if odd is not None:
                raise ModelFormatError(f"{path}: {key[:-1]} symbol {odd[:40]!r} holds a lone surrogate (not UTF-8 text)")
        info = {k: v for k, v in data.items() if k not in ("graphemes", "phonemes", "specials")}
        return cls(data["graphemes"], data["phonemes"], info)
