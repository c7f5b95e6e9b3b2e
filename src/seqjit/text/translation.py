"""A translation model directory: its model (seqjit's format or a Hugging Face directory) and its
SentencePiece codec, read as ``seqjit translate`` and the Ray translate predictor read them.

The codec follows the Marian layout: ``source.spm`` (``target.spm``, default ``source.spm``) and
``vocab.json`` (piece -> model id; a separate ``target_vocab.json`` when present). Each source is cut
into pieces, mapped to ids (unknown pieces -> ``<unk>``) and given the model's end token, as Marian
does; output ids are mapped back to pieces (special tokens dropped) and decoded with ``target.spm``.
Without ``vocab.json`` the SentencePiece ids are the model ids. These files, like ``config.json``,
are read as model files are (:mod:`seqjit.models.files`): regular files inside the directory, of
bounded size; one present but unreadable (a FIFO, a link leaving the directory) is an error, never
skipped.
"""
from __future__ import annotations

import os
from pathlib import Path

from seqjit.errors import ModelFormatError
from seqjit.models.files import model_file, read_json
from seqjit.text.hf_tokenizer import TOKENIZER_JSON, HFTokenizerCodec
from seqjit.text.lines import quoted
from seqjit.text.spm_files import SPM_HINT, SPM_MAX_BYTES, import_sentencepiece, spm_processor, tokenizer_file  # noqa: F401
from seqjit.text.word_vocab import WORD_VOCAB, WordVocabCodec

#: the largest vocab.json / target_vocab.json read; a Marian model's (~60k pieces) is about 1-2 MiB
VOCAB_MAX_BYTES = 64 << 20


def load_any(path):
    """A seqjit model directory, or a Hugging Face directory (``config.json`` with ``model_type``)."""
    import seqjit

    directory = Path(path)
    if not directory.exists():
        raise ModelFormatError(f"{directory} does not exist (expected a model directory with config.json and model.safetensors)")
    if directory.is_dir():
        config = model_file(directory, "config.json")
        if os.path.lexists(config):  # a missing one is reported by seqjit.load
            data = read_json(config)
            if "model_type" in data and "architecture" not in data:
                return seqjit.from_hf(directory)
    return seqjit.load(directory)


def _read_vocab(path: Path) -> dict:
    data = read_json(path, max_bytes=VOCAB_MAX_BYTES)
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in data.items()):
        raise ModelFormatError(f"{path} must hold a JSON object mapping pieces to integer ids")
    return data


class TextCodec:
    """Text <-> model ids through SentencePiece, Marian's way (see the module docstring)."""

    def __init__(self, directory: Path, model):
        self.directory = directory
        self.source = spm_processor(model_file(directory, "source.spm"))
        target_spm = tokenizer_file(directory, "target.spm")
        self.target = spm_processor(target_spm) if target_spm is not None else self.source
        self.eos = model.eos_id
        vocab = tokenizer_file(directory, "vocab.json")
        self.vocab = _read_vocab(vocab) if vocab is not None else None
        target_vocab = tokenizer_file(directory, "target_vocab.json")
        tgt_vocab = _read_vocab(target_vocab) if target_vocab is not None else self.vocab
        self.unk = None
        if self.vocab is not None:
            self.unk = self.vocab.get("<unk>")
            self.pieces = {i: p for p, i in tgt_vocab.items()}
            unk_out = tgt_vocab.get("<unk>")
        else:
            self.unk = self.source.unk_id()
            unk_out = self.target.unk_id()
        # dropped from the output, as transformers' decode(skip_special_tokens=True)
        self.special = {i for i in (model.eos_id, model.pad_id, unk_out) if i is not None}

    def encode(self, text: str) -> list:
        if self.vocab is None:
            return [*self.source.encode(text), self.eos]
        ids = []
        for piece in self.source.encode(text, out_type=str):
            i = self.vocab.get(piece, self.unk)
            if i is None:
                raise ValueError(f"piece {quoted(piece)} is not in {self.directory / 'vocab.json'}, which has no <unk>")
            ids.append(i)
        return [*ids, self.eos]

    def encode_target(self, text: str) -> list:
        """``text`` as target ids (``target.spm`` and the target vocabulary; no end token): a
        ``--target-prefix``."""
        if self.vocab is None:
            return list(self.target.encode(text))
        ids = {p: i for i, p in self.pieces.items()}
        out = []
        for piece in self.target.encode(text, out_type=str):
            if piece not in ids:
                raise ValueError(f"piece {quoted(piece)} is not in the target vocabulary of {self.directory}")
            out.append(ids[piece])
        return out

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids if int(i) not in self.special]
        if self.vocab is None:
            text = self.target.decode(ids)
        else:
            text = self.target.decode([self.pieces[i] for i in ids if i in self.pieces])
        # as transformers' MarianTokenizer: a piece SentencePiece does not know comes back verbatim
        return text.replace("\u2581", " ").replace("\r", " ").replace("\n", " ").strip()


def codec_for(directory, model, *, ids: bool = False):
    """The text codec of ``directory`` unless token ids were asked for (``ids``): a toolkit's token
    lists (``word_vocab.json``, :class:`seqjit.text.word_vocab.WordVocabCodec`), SentencePiece files
    (``source.spm``, :class:`TextCodec`) or else a Hugging Face ``tokenizer.json``
    (:class:`seqjit.text.hf_tokenizer.HFTokenizerCodec`); None when it has neither: lines hold token ids."""
    directory = Path(directory)
    if ids:
        return None
    if tokenizer_file(directory, WORD_VOCAB) is not None:  # a toolkit's vocabularies (JoeyNMT, OpenNMT-py)
        return WordVocabCodec(directory, model)
    if tokenizer_file(directory, "source.spm") is not None:
        return TextCodec(directory, model)
    if tokenizer_file(directory, TOKENIZER_JSON) is not None:
        return HFTokenizerCodec(directory, model)
    return None


def target_language(directory, model, codec, code: str | None) -> dict:
    """``generate``'s ``forced_bos_id`` for the output language ``code`` (``{}`` for None): its token
    in the directory's ``tokenizer.json``, read by ``codec`` when that is the directory's codec (text
    in), else read here (token ids in, as the Ray actors get them). ValueError when the directory has
    no tokenizer.json or no such language token."""
    if code is None:
        return {}
    directory = Path(directory)
    if not isinstance(codec, HFTokenizerCodec):
        if tokenizer_file(directory, TOKENIZER_JSON) is None:
            raise ValueError(f"target language {code!r} needs a {TOKENIZER_JSON} in {directory} (there is none)")
        codec = HFTokenizerCodec(directory, model)
    return dict(forced_bos_id=codec.target_language_id(code))
