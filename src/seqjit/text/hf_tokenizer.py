"""Text <-> model ids through a Hugging Face ``tokenizer.json`` (the ``tokenizers`` package, the
optional extra ``seqjit[hf-tokenizers]``), for ``seqjit translate`` on BART, mBART, M2M100/NLLB,
Pegasus and T5 directories.

A source is encoded as the ``transformers`` fast tokenizer built from the same file encodes it
(``tokenizer(text).input_ids``: the file's normaliser, pre-tokeniser, model and post-processor,
which adds the end token and, for NLLB/mBART, the source language code); output ids are decoded as
``tokenizer.decode(ids, skip_special_tokens=True)``. The file is read as model files are
(:mod:`seqjit.models.files`: a regular file inside the directory, of bounded size) and handed to
``tokenizers`` as text, never as a path.

:func:`target_language_id` turns a language code (``deu_Latn`` for NLLB, ``de`` or ``__de__`` for
M2M100, ``de_DE`` for mBART-50) into its token id: the forced first token of the output.
"""
from __future__ import annotations

import difflib
import json
from pathlib import Path

from seqjit.errors import ModelFormatError
from seqjit.models.files import model_file, read_limited

TOKENIZER_JSON = "tokenizer.json"
EXTRA_HINT = "pip install 'seqjit[hf-tokenizers]' (the tokenizers package)"
#: the largest tokenizer.json read; NLLB-200's is about 17 MiB, mT5's 16 MiB
TOKENIZER_MAX_BYTES = 128 << 20


def import_tokenizers(why: str):
    try:
        import tokenizers
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"{why} needs the tokenizers package: {EXTRA_HINT}") from None
    return tokenizers


class HFTokenizerCodec:
    """``encode(text) -> ids`` and ``decode(ids) -> text`` with ``directory/tokenizer.json``."""

    def __init__(self, directory: Path, model):
        tokenizers = import_tokenizers(f"{directory} has a {TOKENIZER_JSON} (use --ids to read token ids instead); text")
        path = model_file(directory, TOKENIZER_JSON)
        self.path = path
        raw = read_limited(path, TOKENIZER_MAX_BYTES)
        try:
            self.tokenizer = tokenizers.Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # not UTF-8, or the bare Exception tokenizers raises for a malformed file
            raise ModelFormatError(f"{path} is not a readable tokenizer.json: {str(exc)[:200]}") from None
        vocab = model.source_vocab_size
        size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        if vocab is not None and size > vocab:
            # a tokenizer larger than the embedding would give ids the model cannot read
            raise ModelFormatError(f"{path} has {size} tokens, more than the model's source vocabulary ({vocab})")

    def encode(self, text: str) -> list:
        return list(self.tokenizer.encode(text).ids)

    def encode_target(self, text: str) -> list:
        """``text`` as target ids without special tokens (a ``--target-prefix``)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def target_language_id(self, code: str) -> int:
        return target_language_id(self.tokenizer, code, self.path)


def target_language_id(tokenizer, code: str, where) -> int:
    """The token id of language ``code`` (as given, or M2M100's ``__code__``); a ValueError naming
    the closest language tokens of the vocabulary when there is none."""
    for form in (code, f"__{code}__"):
        token = tokenizer.token_to_id(form)
        if token is not None:
            return int(token)
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    special = [t for t in vocab if _language_like(t)] or list(vocab)
    close = difflib.get_close_matches(code, special, n=5, cutoff=0.5)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    raise ValueError(f"--target-lang {json.dumps(code)}: no such language token in {where}{hint}")


def _language_like(token: str) -> bool:
    """NLLB ``deu_Latn``, M2M100 ``__de__``, mBART ``de_DE``."""
    if token.startswith("__") and token.endswith("__") and 2 <= len(token) - 4 <= 3:
        return True
    parts = token.split("_")
    return len(parts) == 2 and parts[0].isalpha() and parts[1].isalpha() and 2 <= len(parts[0]) <= 3 \
        and len(parts[1]) in (2, 4) and (parts[1].isupper() or parts[1].istitle())
