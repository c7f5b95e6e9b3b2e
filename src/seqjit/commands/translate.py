"""``seqjit translate``: run a model over a file, one source per line, output in input order.

Two input forms:

- token ids (any seqjit model, or ``--ids``): each line holds space-separated ids in plain decimal
  digits (0-9: no sign, underscore or other script); each
  output line holds the generated ids, the end token excluded.
- text, when the model directory carries SentencePiece files in the Marian layout: ``source.spm``
  (``target.spm``, default ``source.spm``) and ``vocab.json`` (piece -> model id; a separate
  ``target_vocab.json`` when present). Each source is cut into pieces, mapped to ids (unknown
  pieces -> ``<unk>``) and given the model's end token, as Marian does; output ids are mapped back
  to pieces (special tokens dropped) and decoded with ``target.spm``. Without ``vocab.json`` the
  SentencePiece ids are the model ids. A blank line gives a blank output line. These files, like
  ``config.json``, are read as model files are (:mod:`seqjit.models.files`): regular files inside the
  directory, of bounded size; one present but unreadable (a FIFO, a link leaving the directory) is an
  error, never skipped.
- text, when the directory has no ``source.spm`` but a Hugging Face ``tokenizer.json`` (BART, mBART,
  M2M100/NLLB, Pegasus, T5): encoded and decoded as ``transformers``' tokenizer from that file does
  (:mod:`seqjit.commands.hf_tokenizer`; the optional extra ``seqjit[hf-tokenizers]``).
  ``--target-lang CODE`` (``deu_Latn``, ``de``, ``de_DE``) makes that language's token the first
  generated one (the forced BOS token of NLLB, M2M100 and mBART-50).

Sources are batched by tokens (:func:`seqjit.commands.batching.process`); every output line is
written and flushed as soon as all earlier ones are out. A line that cannot be used (not UTF-8, a
non-integer token, an id outside the source vocabulary, too long for the model, an empty line of
ids) is reported on stderr as ``seqjit: FILE:LINE: what is wrong`` and gives an empty output line,
so output lines stay aligned with input lines; the command goes on and exits with status 1. The
progress bar is drawn only when stderr is a terminal. ``--format json`` writes one object per line
instead: the best hypothesis's ``ids``, ``text``, ``score`` and ``normalized_score``
(:mod:`seqjit.commands.scores`), the n-best in ``hypotheses`` (``--num-hypotheses``) and ``error``.
``--output`` is written to a temporary file
renamed into place when the run ends, and may not name the input file (nor a link to it).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from seqjit.commands import ray_run
from seqjit.commands.batching import Record, count_lines, process, read_lines
from seqjit.commands.hf_tokenizer import TOKENIZER_JSON, HFTokenizerCodec
from seqjit.commands.messages import Reporter, hint_terminal_stdin, is_terminal, quoted
from seqjit.commands.output import STDIO, output_stream, refuse_input_as_output
from seqjit.commands.scores import both_scores, output_length
from seqjit.errors import ModelFormatError
from seqjit.models.files import model_file, read_json, read_limited

SPM_HINT = "pip install sentencepiece"
#: the largest source.spm / target.spm read; a Marian model's is under 1 MiB
SPM_MAX_BYTES = 64 << 20
#: the largest vocab.json / target_vocab.json read; a Marian model's (~60k pieces) is about 1-2 MiB
VOCAB_MAX_BYTES = 64 << 20


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "translate", help="run a model over a file of token ids or text, one source per line",
        description="Run a seqjit model over INPUT, one source per line, and write one output line per input line. "
                    "Lines hold space-separated token ids, or text when the model directory carries SentencePiece "
                    "files (source.spm, target.spm, vocab.json, as Marian models do).")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a seqjit model directory (config.json + model.safetensors) or a Hugging Face MarianMT directory")
    p.add_argument("--input", default="-", metavar="FILE", help="one source per line (default: - , stdin)")
    p.add_argument("--output", default="-", metavar="FILE", help="one result per line (default: - , stdout)")
    p.add_argument("--beam-size", type=int, default=1, metavar="N", help="beam width (default: 1, greedy)")
    p.add_argument("--max-length", type=int, default=None, metavar="N",
                   help="at most N generated tokens per source, end token included (default: 256, or the model's "
                        "max_positions when smaller)")
    p.add_argument("--max-batch-tokens", type=int, default=4096, metavar="N",
                   help="at most N padded source tokens per batch (default: 4096)")
    p.add_argument("--max-batch-size", type=int, default=256, metavar="N", help="at most N sources per batch (default: 256)")
    p.add_argument("--ids", action="store_true", help="read and write token ids even if the model has SentencePiece files")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: one output per line; json: one object per line with \"ids\", \"text\" (null without "
                        "SentencePiece files), \"score\" (sum of log-probabilities), \"normalized_score\" (divided by "
                        "the length), \"hypotheses\" (the n-best) and \"error\" (default: text)")
    p.add_argument("--num-hypotheses", type=int, default=1, metavar="N",
                   help="n-best per source, with --format json and --beam-size of at least N (default: 1)")
    p.add_argument("--target-lang", default=None, metavar="CODE",
                   help="the output language of a many-to-many model read with a tokenizer.json (NLLB deu_Latn, "
                        "M2M100 de, mBART-50 de_DE): its token is forced as the first generated token")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    ray_run.add_arguments(p)
    p.set_defaults(func=run)


# -- model and tokenizer ---------------------------------------------------------------------------
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


def import_sentencepiece(why: str):
    try:
        import sentencepiece
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"{why} needs the sentencepiece package: {SPM_HINT}") from None
    return sentencepiece


def tokenizer_file(directory: Path, name: str):
    """``directory / name`` when present (a dangling link or a FIFO counts: reading it is refused
    then, rather than the file being silently ignored); None when absent. Refused when it leaves
    the model directory."""
    path = model_file(directory, name)
    return path if os.path.lexists(path) else None


def _read_vocab(path: Path) -> dict:
    data = read_json(path, max_bytes=VOCAB_MAX_BYTES)
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in data.items()):
        raise ModelFormatError(f"{path} must hold a JSON object mapping pieces to integer ids")
    return data


class TextCodec:
    """Text <-> model ids through SentencePiece, Marian's way (see the module docstring)."""

    def __init__(self, directory: Path, model):
        spm = import_sentencepiece(f"{directory} has SentencePiece files (use --ids to read token ids instead); text")
        self.directory = directory

        def processor(path):
            proto = read_limited(path, SPM_MAX_BYTES)  # bytes, never the path: sentencepiece would open anything
            if not proto:
                raise ModelFormatError(f"{path} is empty, not a SentencePiece model")
            try:
                return spm.SentencePieceProcessor(model_proto=proto)
            except (OSError, RuntimeError) as exc:
                raise ModelFormatError(f"{path} is not a readable SentencePiece model: {exc}") from None

        self.source = processor(model_file(directory, "source.spm"))
        target_spm = tokenizer_file(directory, "target.spm")
        self.target = processor(target_spm) if target_spm is not None else self.source
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

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids if int(i) not in self.special]
        if self.vocab is None:
            text = self.target.decode(ids)
        else:
            text = self.target.decode([self.pieces[i] for i in ids if i in self.pieces])
        # as transformers' MarianTokenizer: a piece SentencePiece does not know comes back verbatim
        return text.replace("\u2581", " ").replace("\r", " ").replace("\n", " ").strip()


# -- reading ---------------------------------------------------------------------------------------
BLANK = ""  # Record.error for a blank text line: emitted as a blank line, not reported


def parse_ids(text: str) -> list:
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


def check_source(ids: list, model, max_positions) -> None:
    vocab = model.source_vocab_size
    if vocab is not None:
        for position, value in enumerate(ids, 1):
            if not 0 <= value < vocab:
                raise ValueError(f"token id {value} (token {position}) is outside the source vocabulary [0, {vocab})")
    if max_positions is not None and len(ids) > max_positions:
        raise ValueError(f"the source has {len(ids)} tokens, more than the model's max_positions ({max_positions})")


def records(path, model, codec, max_positions):
    return line_records(read_lines(path), model, codec, max_positions)


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
                check_source(ids, model, max_positions)
            except ValueError as exc:
                error = str(exc)
        if error is not None:
            yield Record(number - 1, number, error=error)
        else:
            yield Record(number - 1, number, item=ids, length=len(ids))


def json_line(result, error, codec, *, beam: bool, max_length: int) -> str:
    """One ``--format json`` line: the best hypothesis's ids, text and scores, the n-best, the error
    (a blank text line: no hypotheses and no error)."""
    hypotheses = []
    for ids, score in zip(result.ids, result.scores) if result is not None else ():
        ids = [int(i) for i in ids]
        hypotheses.append({"ids": ids, "text": codec.decode(ids) if codec is not None else None,
                           **both_scores(score, output_length(ids, max_length), beam=beam)})
    best = hypotheses[0] if hypotheses else {"ids": None, "text": None, "score": None, "normalized_score": None}
    return json.dumps({**best, "hypotheses": hypotheses, "error": error}, ensure_ascii=False)


class Failed:
    """A source that could not be decoded (its batch's error, found by running it alone)."""

    def __init__(self, message: str):
        self.message = message


# -- the command -----------------------------------------------------------------------------------
def _positive(name: str, value) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")


def run(args) -> int:
    for name in ("beam_size", "max_length", "max_batch_tokens", "max_batch_size", "num_hypotheses"):
        _positive("--" + name.replace("_", "-"), getattr(args, name, None))
    json_out = getattr(args, "format", "text") == "json"
    hypotheses = getattr(args, "num_hypotheses", 1)
    if hypotheses > args.beam_size:
        raise ValueError(f"--num-hypotheses {hypotheses} needs --beam-size of at least {hypotheses}")
    if hypotheses > 1 and not json_out:
        raise ValueError("--num-hypotheses needs --format json (a text line holds one output)")
    if json_out and args.ray is not None:
        raise ValueError("--format json is not supported with --ray yet")
    if args.input != "-":
        source = Path(args.input)
        if not source.exists():
            raise FileNotFoundError(f"the input file {source} does not exist")
        if source.is_dir():
            raise IsADirectoryError(f"the input {source} is a directory, not a file")
    refuse_input_as_output(args.input, args.output)

    if args.ray is not None:
        return ray_run.run_translate(args)
    directory = Path(args.model)
    model = load_any(directory)
    codec = None
    if not args.ids and tokenizer_file(directory, "source.spm") is not None:
        codec = TextCodec(directory, model)
    elif not args.ids and tokenizer_file(directory, TOKENIZER_JSON) is not None:
        codec = HFTokenizerCodec(directory, model)
    target_lang = getattr(args, "target_lang", None)
    forced = {}
    if target_lang is not None:
        if not isinstance(codec, HFTokenizerCodec):
            raise ValueError(f"--target-lang needs text read with a {TOKENIZER_JSON} (none in {directory}, or --ids given)")
        forced = dict(forced_bos_id=codec.target_language_id(target_lang))

    max_positions = getattr(model.config, "max_positions", None)
    max_length = args.max_length
    if max_length is None:
        max_length = 256 if max_positions is None else min(256, max_positions)
    elif max_positions is not None and max_length > max_positions:
        raise ValueError(f"--max-length {max_length} exceeds the model's max_positions ({max_positions})")
    options = dict(beam_size=args.beam_size, max_length=max_length, num_hypotheses=hypotheses, return_scores=json_out,
                   **forced)

    def run_batch(items):
        try:
            return [r if json_out else r.ids[0] for r in model.generate(items, max_batch_size=len(items), **options)]
        except (ValueError, TypeError, IndexError) as exc:
            if len(items) == 1:
                return [Failed(str(exc))]
            return [run_batch([item])[0] for item in items]  # find the source at fault

    name = "<stdin>" if args.input == STDIO else args.input
    show_bar = not args.quiet and args.input != STDIO and (args.output != STDIO or not is_terminal(sys.stdout))
    reporter = Reporter(name, bar=show_bar, total=lambda: count_lines(args.input))
    bad = total = 0

    def emit(record, result):
        nonlocal bad, total
        total += 1
        if isinstance(result, Failed):
            record.error, result = result.message, None
        if record.error:
            bad += 1
            reporter.line(record.line, record.error)
        if json_out:
            line = json_line(result, record.error or None, codec, beam=args.beam_size > 1, max_length=max_length)
        elif result is None:
            line = ""
        elif codec is not None:
            line = codec.decode(result)
        else:
            line = " ".join(str(int(i)) for i in result)
        out.write(line + "\n")
        out.flush()

    if args.input == STDIO:
        hint_terminal_stdin("sources (or give --input FILE)")
    with output_stream(args.output) as out:
        try:
            process(records(args.input, model, codec, max_positions), run_batch, emit, max_tokens=args.max_batch_tokens,
                    max_batch=args.max_batch_size, progress=reporter.update)
        finally:
            reporter.close()
    if bad:
        instead = "objects with an \"error\"" if json_out else "empty output lines"
        reporter.note(f"{bad} of {total} line(s) could not be translated ({instead} in their place)")
        return 1
    return 0
