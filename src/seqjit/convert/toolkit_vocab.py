"""The vocabularies of JoeyNMT and OpenNMT-py models as seqjit's token-list codec
(``word_vocab.json``, :mod:`seqjit.text.word_vocab`), with ids exactly as the toolkit assigns them
and its tokenisation, so ``seqjit translate`` reads and writes text for a converted model.

- JoeyNMT (``vocabulary.Vocabulary``, ``build_vocab``): the ids are the special symbols (``data:
  special_symbols``, default ``<unk> <pad> <s> </s>``) then the lines of ``src_vocab.txt`` /
  ``trg_vocab.txt`` (the files a model directory holds, or ``voc_file``), a token listed twice
  keeping its first id. Tokenisation (``data: src/trg``): ``level`` word (whitespace) or char, or
  bpe with ``tokenizer_type: sentencepiece`` (``tokenizer_cfg: model_file``); ``lowercase``; each
  source ends with ``</s>``.
- OpenNMT-py (3.x): the checkpoint's ``vocab`` (``{"src": [tokens], "tgt": [tokens]}``, id order),
  or the vocab files ``onmt_build_vocab`` writes (``token<TAB>count`` lines) built as
  ``inputters.build_vocab`` builds them: ``<unk> <blank> <s> </s>`` then the tokens seen at least
  ``*_words_min_frequency`` times in file order, at most ``*_vocab_size`` in all, padded to a multiple
  of ``vocab_size_multiple`` with ``averyunlikelytoken<i>``. Tokenisation: whitespace, or the
  ``sentencepiece`` transform (``src_subword_model``, ``tgt_subword_model``); sources get no end token.

Other tokenisers (subword-nmt BPE, OpenNMT-py's ``bpe``/``onmt_tokenize`` transforms, Moses
pre-tokenisation) raise a :class:`ConfigError` naming the option: convert without the vocabularies
and translate ids (``--ids``).
"""
from __future__ import annotations

import json
from pathlib import Path

from seqjit.errors import ConfigError, ModelFormatError

#: the codec file (read by :mod:`seqjit.text.word_vocab`, whose docstring describes its fields)
WORD_VOCAB = "word_vocab.json"
FORMAT = "seqjit word vocab 1"
TOKENIZERS = ("word", "char", "sentencepiece")
SPACE_ESCAPE = "\u2581"

#: the largest vocabulary file read (a 100k-token list with counts is ~2 MB)
VOCAB_FILE_MAX_BYTES = 64 << 20
JOEYNMT_SPECIALS = ("<unk>", "<pad>", "<s>", "</s>")
OPENNMT_SPECIALS = ("<unk>", "<blank>", "<s>", "</s>")
OPENNMT_VOCAB_PAD = "averyunlikelytoken"
#: OpenNMT-py transforms the codec reproduces: sentencepiece, and those that act in training only
#: (filtering, noise); any other (bpe, onmt_tokenize, prefix, normalize...) is refused by name
OPENNMT_TRANSFORMS = frozenset({"sentencepiece", "filtertoolong", "switchout", "tokendrop", "tokenmask", "bart"})


def check_word_vocab(data, where) -> dict:
    """``data`` when it is a valid ``word_vocab.json`` object, else a ModelFormatError naming ``where``."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ModelFormatError(f"{where}: not a seqjit word vocabulary (\"format\": {FORMAT!r})")
    for side in ("source", "target"):
        tokens = data.get(side)
        if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
            raise ModelFormatError(f"{where}: {side!r} must be a non-empty list of token strings")
        if len(set(tokens)) != len(tokens):
            raise ModelFormatError(f"{where}: {side!r} lists a token twice")
    if data.get("tokenizer") not in TOKENIZERS:
        raise ModelFormatError(f"{where}: 'tokenizer' must be one of {list(TOKENIZERS)}, got {data.get('tokenizer')!r}")
    for key in ("lowercase", "source_eos"):
        if not isinstance(data.get(key), bool):
            raise ModelFormatError(f"{where}: {key!r} must be true or false, got {data.get(key)!r}")
    if not isinstance(data.get("unk"), str):
        raise ModelFormatError(f"{where}: 'unk' must be a token string")
    return data


def _lines(path) -> list:
    from seqjit.models.files import read_limited

    path = Path(path)
    if not path.is_file():
        raise ModelFormatError(f"vocabulary file {path} does not exist or is not a file")
    try:
        return read_limited(path, VOCAB_FILE_MAX_BYTES).decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"vocabulary file {path} is not UTF-8 text: {exc}") from None


def _unique(tokens) -> list:
    return list(dict.fromkeys(tokens))


def word_vocab(source: list, target: list, *, tokenizer: str, lowercase: bool, source_eos: bool, unk: str,
               spm: dict | None = None) -> dict:
    """A ``word_vocab.json`` object (checked); ``spm``: ``{"source.spm": path, "target.spm": path}``
    to copy beside it (``tokenizer="sentencepiece"``), kept under the ``"files"`` key for :func:`write`."""
    data = {"format": FORMAT, "source": list(source), "target": list(target), "tokenizer": tokenizer,
            "lowercase": bool(lowercase), "source_eos": bool(source_eos), "unk": unk}
    check_word_vocab(data, "the converted vocabulary")
    return {**data, "files": dict(spm or {})}


def check_sizes(vocab: dict, *, src_vocab_size: int, tgt_vocab_size: int) -> None:
    """A ModelFormatError unless the token lists are as long as the model's vocabularies."""
    for side, size in (("source", src_vocab_size), ("target", tgt_vocab_size)):
        if len(vocab[side]) != size:
            raise ModelFormatError(f"the {side} vocabulary has {len(vocab[side])} tokens but the model's embedding "
                                   f"has {size} rows: not this model's vocabulary (or built with other options)")


def write(out, vocab: dict, *, src_vocab_size: int, tgt_vocab_size: int) -> list:
    """Write ``word_vocab.json`` (and its SentencePiece models) into directory ``out``; the sizes must
    be the model's (:func:`check_sizes`). Returns the names written."""
    check_sizes(vocab, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)
    out = Path(out)
    files = {name: Path(path).read_bytes() for name, path in vocab["files"].items()}
    data = {k: v for k, v in vocab.items() if k != "files"}
    (out / WORD_VOCAB).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    for name, raw in files.items():
        (out / name).write_bytes(raw)
    return [WORD_VOCAB, *files]


def _spm_file(path, option: str, base) -> Path:
    found = Path(path) if Path(path).is_absolute() or base is None else Path(base) / path
    if not found.is_file():
        found = Path(path)
    if not found.is_file():
        raise ConfigError(f"{option} names SentencePiece model {path}, which is not there (nor beside the model)")
    return found


# -- JoeyNMT ---------------------------------------------------------------------------------------
def joeynmt_vocab(data_cfg: dict | None, src_file, trg_file, *, base=None) -> dict:
    """The vocabularies of a JoeyNMT model from its ``data:`` config section (None: word level) and
    its vocabulary files; ``base``: the directory relative paths in the config are tried in."""
    data_cfg = data_cfg or {}
    symbols = data_cfg.get("special_symbols") or {}
    specials = [symbols.get(k, d) for k, d in zip(("unk_token", "pad_token", "bos_token", "eos_token"), JOEYNMT_SPECIALS)]
    if symbols.get("sep_token"):
        specials.append(symbols["sep_token"])
    specials += list(symbols.get("lang_tags") or [])
    sides = {side: data_cfg.get(side) or {} for side in ("src", "trg")}
    kinds, spm = set(), {}
    for side, name in (("src", "source.spm"), ("trg", "target.spm")):
        cfg = sides[side]
        level = cfg.get("level", "word")
        tok_cfg = cfg.get("tokenizer_cfg") or {}
        if tok_cfg.get("pretokenizer", "none") != "none":
            raise ConfigError(f"from_joeynmt: data.{side}.tokenizer_cfg.pretokenizer "
                              f"{tok_cfg['pretokenizer']!r} is not supported (translate ids: --ids)")
        if level == "bpe":
            kind = cfg.get("tokenizer_type", cfg.get("bpe_type", "sentencepiece"))
            if kind != "sentencepiece" or "model_file" not in tok_cfg:
                raise ConfigError(f"from_joeynmt: data.{side} level 'bpe' with tokenizer_type {kind!r} is not "
                                  "supported (sentencepiece with tokenizer_cfg.model_file is; or translate ids: --ids)")
            spm[name] = _spm_file(tok_cfg["model_file"], f"data.{side}.tokenizer_cfg.model_file", base)
            level = "sentencepiece"
        elif level not in ("word", "char"):
            raise ConfigError(f"from_joeynmt: data.{side}.level {level!r} is not supported (word, char, bpe)")
        kinds.add(level)
    if len(kinds) != 1:
        raise ConfigError(f"from_joeynmt: data.src and data.trg tokenise differently ({sorted(kinds)}); seqjit's "
                          "codec needs one way")
    source = _unique(specials + _lines(src_file))
    target = _unique(specials + _lines(trg_file))
    return word_vocab(source, target, tokenizer=kinds.pop(), lowercase=bool(sides["src"].get("lowercase", False)),
                      source_eos=True, unk=specials[0], spm=spm)


# -- OpenNMT-py ------------------------------------------------------------------------------------
def opennmt_vocab_file(path, opt: dict, side: str) -> list:
    """The id-ordered tokens OpenNMT-py builds from a vocab file (module docstring); ``side`` "src"/"tgt"."""
    lines = [line.strip() for line in _lines(path) if line.strip()]
    if not lines:
        raise ModelFormatError(f"vocabulary file {path} is empty")
    first = lines[0].split(None, 1)
    min_count = int(opt.get(f"{side}_words_min_frequency", 0) or 0)
    if len(first) == 2 and first[-1].isdigit():
        tokens = [line.split(None, 1)[0] for line in lines if int(line.split(None, 1)[1]) >= min_count]
    else:
        tokens = [line.split()[0] for line in lines]
    vocab = _unique(list(OPENNMT_SPECIALS) + tokens)
    limit = int(opt.get(f"{side}_vocab_size", 0) or 0)
    if limit > 0:
        vocab = vocab[:max(limit, len(OPENNMT_SPECIALS))]
    multiple = int(opt.get("vocab_size_multiple", 1) or 1)
    if multiple > 1 and len(vocab) % multiple:
        vocab += [f"{OPENNMT_VOCAB_PAD}{i}" for i in range(multiple - len(vocab) % multiple)]
    return vocab


def opennmt_vocab(opt: dict, vocab: dict | None = None, src_file=None, tgt_file=None, *, base=None) -> dict:
    """The vocabularies of an OpenNMT-py model: the checkpoint's ``vocab`` dict, or its vocab files
    (``tgt_file`` None with ``share_vocab``: the source's), tokenised as ``opt``'s transforms say."""
    if vocab is not None:
        source, target = vocab.get("src"), vocab.get("tgt")
        if not isinstance(source, list) or not isinstance(target, list):
            raise ModelFormatError("from_opennmt: the checkpoint's vocab has no 'src'/'tgt' token lists")
    else:
        if src_file is None:
            raise ConfigError("from_opennmt: give the checkpoint's vocab or the source vocab file")
        source = opennmt_vocab_file(src_file, opt, "src")
        target = source if tgt_file is None and opt.get("share_vocab") else opennmt_vocab_file(tgt_file, opt, "tgt")
    transforms = list(opt.get("transforms") or [])
    unsupported = [t for t in transforms if t not in OPENNMT_TRANSFORMS]
    if unsupported:
        raise ConfigError(f"from_opennmt: transforms {unsupported} are not supported by seqjit's codec (it runs "
                          f"{sorted(OPENNMT_TRANSFORMS)}; or translate ids: --ids)")
    spm, tokenizer = {}, "word"
    if "sentencepiece" in transforms:
        tokenizer = "sentencepiece"
        for option, name in (("src_subword_model", "source.spm"), ("tgt_subword_model", "target.spm")):
            if not opt.get(option):
                raise ConfigError(f"from_opennmt: the sentencepiece transform needs option {option}")
            spm[name] = _spm_file(opt[option], option, base)
    return word_vocab(source, target, tokenizer=tokenizer, lowercase=False, source_eos=False, unk=OPENNMT_SPECIALS[0],
                      spm=spm)


__all__ = ["FORMAT", "WORD_VOCAB", "check_sizes", "check_word_vocab", "joeynmt_vocab", "opennmt_vocab", "opennmt_vocab_file", "word_vocab", "write"]
