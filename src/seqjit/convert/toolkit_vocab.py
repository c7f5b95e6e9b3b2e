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

A file an option names is found only inside the directory of the checkpoint or config naming it
(:func:`named_file`), or given on the command line (``--src-spm``...); a SentencePiece model is read
bounded and must load as one (:mod:`seqjit.convert.spm_check`) before anything is written, and
:func:`write` replaces, never follows, a link planted at a name it writes.

Other tokenisers (subword-nmt BPE, OpenNMT-py's ``bpe``/``onmt_tokenize`` transforms, Moses
pre-tokenisation) raise a :class:`ConfigError` naming the option: convert without the vocabularies
and translate ids (``--ids``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from seqjit.errors import ConfigError, ModelFormatError
from seqjit.convert.spm_check import spm_model
from seqjit.models.files import model_file, write_replacing

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
    """A ``word_vocab.json`` object (checked); ``spm``: ``{"source.spm": bytes, "target.spm": bytes}``
    (read and checked already: :func:`spm_model`) to write beside it (``tokenizer="sentencepiece"``),
    kept under the ``"files"`` key for :func:`write`."""
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
    files = vocab["files"]
    data = {k: v for k, v in vocab.items() if k != "files"}
    write_replacing(out / WORD_VOCAB, json.dumps(data, ensure_ascii=False))  # a planted link is replaced
    for name, raw in files.items():
        write_replacing(out / name, raw)
    return [WORD_VOCAB, *files]


def _bases(base) -> list:
    if base is None:
        return []
    return [Path(base)] if isinstance(base, (str, os.PathLike)) else [Path(b) for b in base]


def named_file(value, option: str, base, flag: str) -> Path:
    """The file a toolkit's option ``value`` names, found only inside the directories ``base`` (of
    the checkpoint or config naming it; :func:`seqjit.models.files.model_file`: no absolute path, no
    ``..``, no link leading out): as named when a relative name, else by its base name. Anything else
    is a ConfigError naming the option, the directories and ``flag``: a path inside a file never makes
    seqjit read (or copy) a file elsewhere."""
    if not isinstance(value, (str, os.PathLike)) or not str(value) or "\x00" in str(value):
        raise ConfigError(f"{option} must name a file, got {str(value)[:80]!r}")
    value = str(value)
    names = dict.fromkeys(([value] if not os.path.isabs(value) else []) + [Path(value).name])
    bases, refused = _bases(base), []
    for directory in bases:
        for name in names:
            try:
                path = model_file(directory, name)
            except ModelFormatError as exc:
                refused.append(str(exc))
                continue
            if os.path.lexists(path):  # a dangling link or a FIFO is found, then refused when read
                return path
    where = " or ".join(str(b) for b in bases) or "the model's directory"
    why = f" ({refused[0]})" if refused else ""
    raise ConfigError(f"{option} names {value[:200]!r}, which is not a file inside {where}{why}; seqjit reads only "
                      f"the files beside the checkpoint or config that names them: copy it there, or give it with "
                      f"{flag}")


# -- JoeyNMT ---------------------------------------------------------------------------------------
def joeynmt_vocab(data_cfg: dict | None, src_file, trg_file, *, base=None, spm_files=(None, None)) -> dict:
    """The vocabularies of a JoeyNMT model from its ``data:`` config section (None: word level) and
    its vocabulary files; ``base``: the directories (config's, checkpoint's) the config's file names
    are found in (:func:`named_file`); ``spm_files``: the source and target SentencePiece models given
    on the command line (``--src-spm`` / ``--tgt-spm``), used instead of ``tokenizer_cfg.model_file``."""
    data_cfg = data_cfg or {}
    symbols = data_cfg.get("special_symbols") or {}
    specials = [symbols.get(k, d) for k, d in zip(("unk_token", "pad_token", "bos_token", "eos_token"), JOEYNMT_SPECIALS)]
    if symbols.get("sep_token"):
        specials.append(symbols["sep_token"])
    specials += list(symbols.get("lang_tags") or [])
    sides = {side: data_cfg.get(side) or {} for side in ("src", "trg")}
    kinds, spm = set(), {}
    for (side, name), given in zip((("src", "source.spm"), ("trg", "target.spm")), spm_files):
        cfg = sides[side]
        level = cfg.get("level", "word")
        tok_cfg = cfg.get("tokenizer_cfg") or {}
        if tok_cfg.get("pretokenizer", "none") != "none":
            raise ConfigError(f"from_joeynmt: data.{side}.tokenizer_cfg.pretokenizer "
                              f"{tok_cfg['pretokenizer']!r} is not supported (translate ids: --ids)")
        if level == "bpe":
            kind = cfg.get("tokenizer_type", cfg.get("bpe_type", "sentencepiece"))
            if kind != "sentencepiece" or ("model_file" not in tok_cfg and given is None):
                raise ConfigError(f"from_joeynmt: data.{side} level 'bpe' with tokenizer_type {kind!r} is not "
                                  "supported (sentencepiece with tokenizer_cfg.model_file is; or translate ids: --ids)")
            option = f"data.{side}.tokenizer_cfg.model_file"
            flag = "--src-spm" if side == "src" else "--tgt-spm"
            path = given if given is not None else named_file(tok_cfg["model_file"], option, base, flag)
            spm[name] = spm_model(path, flag if given is not None else option)
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


def opennmt_vocab(opt: dict, vocab: dict | None = None, src_file=None, tgt_file=None, *, base=None,
                  spm_files=(None, None)) -> dict:
    """The vocabularies of an OpenNMT-py model: the checkpoint's ``vocab`` dict, or its vocab files
    (``tgt_file`` None with ``share_vocab``: the source's), tokenised as ``opt``'s transforms say;
    the SentencePiece models ``src_subword_model`` / ``tgt_subword_model`` name are found inside
    ``base`` (:func:`named_file`) unless given as ``spm_files`` (``--src-spm`` / ``--tgt-spm``)."""
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
        for (option, name, flag), given in zip((("src_subword_model", "source.spm", "--src-spm"),
                                                 ("tgt_subword_model", "target.spm", "--tgt-spm")), spm_files):
            if given is None and not opt.get(option):
                raise ConfigError(f"from_opennmt: the sentencepiece transform needs option {option} (or {flag})")
            path = given if given is not None else named_file(opt[option], f"from_opennmt: option {option}", base, flag)
            spm[name] = spm_model(path, flag if given is not None else f"option {option}")
    return word_vocab(source, target, tokenizer=tokenizer, lowercase=False, source_eos=False, unk=OPENNMT_SPECIALS[0],
                      spm=spm)


__all__ = ["FORMAT", "WORD_VOCAB", "check_sizes", "check_word_vocab", "joeynmt_vocab", "named_file", "opennmt_vocab",
           "opennmt_vocab_file", "word_vocab", "write"]
