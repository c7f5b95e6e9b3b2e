"""Target text -> target ids, for scoring given translations (``seqjit score``).

A target is tokenised as the model's training tokenised its labels, without the end token (scoring
appends it, :mod:`seqjit.decoding.scoring`):

- SentencePiece files in the Marian layout (:class:`~seqjit.text.translation.TextCodec`): pieces
  from ``target.spm`` (default ``source.spm``), mapped with ``target_vocab.json`` (default
  ``vocab.json``; unknown pieces -> ``<unk>``); without a vocabulary the SentencePiece ids;
- a Hugging Face ``tokenizer.json`` (:class:`~seqjit.text.hf_tokenizer.HFTokenizerCodec`): its
  encoding with special tokens, as ``transformers`` builds ``labels`` (BART's ``<s>`` kept), the final
  end token dropped.

Other codecs (a toolkit's ``word_vocab.json``) have no target encoder here: give ids (``--ids``).
"""
from __future__ import annotations

from seqjit.text.hf_tokenizer import HFTokenizerCodec
from seqjit.text.lines import quoted
from seqjit.text.translation import TextCodec


def target_encoder(codec, model):
    """``encode(text) -> target ids`` for ``codec``, or None when it has none (see the module docstring)."""
    if isinstance(codec, TextCodec):
        return _spm_encoder(codec)
    if isinstance(codec, HFTokenizerCodec):
        eos = model.eos_id

        def encode(text: str) -> list:
            ids = list(codec.tokenizer.encode(text).ids)
            return ids[:-1] if ids and ids[-1] == eos else ids
        return encode
    return None


def _spm_encoder(codec: TextCodec):
    if codec.vocab is None:
        return lambda text: list(codec.target.encode(text))
    ids = {piece: i for i, piece in codec.pieces.items()}
    unk = ids.get("<unk>")

    def encode(text: str) -> list:
        out = []
        for piece in codec.target.encode(text, out_type=str):
            i = ids.get(piece, unk)
            if i is None:
                raise ValueError(f"target piece {quoted(piece)} is not in the target vocabulary of {codec.directory}, "
                                 "which has no <unk>")
            out.append(i)
        return out
    return encode
