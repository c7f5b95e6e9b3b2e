"""Text <-> model ids through a token list per side (``word_vocab.json``), the vocabularies of models
trained with JoeyNMT or OpenNMT-py (written by ``seqjit convert --from joeynmt|opennmt``:
:mod:`seqjit.convert.toolkit_vocab`), tokenised as the toolkit tokenised them.

``word_vocab.json``::

    {"format": "seqjit word vocab 1",
     "source": ["<unk>", "<pad>", "<s>", "</s>", ...],   token i has id i
     "target": [...],
     "tokenizer": "word" | "char" | "sentencepiece",
     "lowercase": false,          lower-case the source first (JoeyNMT ``lowercase``)
     "source_eos": true,          end each source with the model's end token (JoeyNMT: yes,
                                  OpenNMT-py: no)
     "unk": "<unk>"}              what an unknown token becomes

- ``"word"``: tokens are the source's whitespace-separated words; the output tokens are joined by
  one space;
- ``"char"`` (JoeyNMT ``level: char``): each character a token, spaces written as ``"\u2581"``;
  the output joined without spaces, ``"\u2581"`` back to spaces;
- ``"sentencepiece"``: pieces from ``source.spm`` (output decoded with ``target.spm``, default
  ``source.spm``) beside the file, looked up in the token lists.

The model's pad, start and end tokens are dropped from the output (the end token ends it); ``<unk>``
stays, as the toolkits show it. The file, like ``config.json``, is read as model files are
(:mod:`seqjit.models.files`).
"""
from __future__ import annotations

from pathlib import Path

from seqjit.convert.toolkit_vocab import SPACE_ESCAPE, WORD_VOCAB, check_word_vocab
from seqjit.errors import ModelFormatError
from seqjit.models.files import model_file, read_json
from seqjit.text.lines import quoted
from seqjit.text.spm_files import spm_processor, tokenizer_file

#: the largest word_vocab.json read (two 100k-token lists are about 3 MB)
WORD_VOCAB_MAX_BYTES = 64 << 20


class WordVocabCodec:
    """``encode(text) -> ids`` and ``decode(ids) -> text`` with ``directory/word_vocab.json``."""

    def __init__(self, directory: Path, model):
        path = model_file(directory, WORD_VOCAB)
        data = check_word_vocab(read_json(path, max_bytes=WORD_VOCAB_MAX_BYTES), path)
        self.path = path
        for side, size in (("source", model.source_vocab_size), ("target", model.target_vocab_size)):
            if size is not None and len(data[side]) != size:
                raise ModelFormatError(f"{path}: the {side} vocabulary has {len(data[side])} tokens, the model's "
                                       f"{size}: not this model's vocabulary")
        self.ids = {t: i for i, t in enumerate(data["source"])}
        self.tokens = data["target"]
        self.tokenizer, self.lowercase, self.source_eos = data["tokenizer"], data["lowercase"], data["source_eos"]
        self.unk = self.ids.get(data["unk"])
        self.eos = model.eos_id
        self.dropped = {i for i in (model.pad_id, model.decoder_start_id, model.eos_id) if i is not None}
        if self.tokenizer == "sentencepiece":
            self.source_spm = spm_processor(model_file(directory, "source.spm"))
            target = tokenizer_file(directory, "target.spm")
            self.target_spm = spm_processor(target) if target is not None else self.source_spm

    def _split(self, text: str) -> list:
        if self.lowercase:
            text = text.lower()
        if self.tokenizer == "word":
            return text.split()
        if self.tokenizer == "char":
            return list(text.replace(" ", SPACE_ESCAPE))
        return self.source_spm.encode(text, out_type=str)

    def encode(self, text: str) -> list:
        ids = []
        for token in self._split(text):
            i = self.ids.get(token, self.unk)
            if i is None:
                raise ValueError(f"token {quoted(token)} is not in the source vocabulary of {self.path}, which has no "
                                 "unknown token")
            ids.append(i)
        return ids + [self.eos] if self.source_eos else ids

    def decode(self, ids) -> str:
        tokens = [self.tokens[int(i)] for i in ids if int(i) not in self.dropped and 0 <= int(i) < len(self.tokens)]
        if self.tokenizer == "word":
            return " ".join(tokens)
        if self.tokenizer == "char":
            return "".join(tokens).replace(SPACE_ESCAPE, " ")
        return self.target_spm.decode(tokens).replace(SPACE_ESCAPE, " ").strip()  # as JoeyNMT's post_process
