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
  (:mod:`seqjit.text.hf_tokenizer`; the optional extra ``seqjit[hf-tokenizers]``).
  ``--target-lang CODE`` (``deu_Latn``, ``de``, ``de_DE``) makes that language's token the first
  generated one (the forced BOS token of NLLB, M2M100 and mBART-50).

Sources are batched by tokens (:func:`seqjit.text.batching.process`; the line rules and the codec:
:mod:`seqjit.text`); every output line is
written and flushed as soon as all earlier ones are out. A line that cannot be used (not UTF-8, a
non-integer token, an id outside the source vocabulary, too long for the model, an empty line of
ids) is reported on stderr as ``seqjit: FILE:LINE: what is wrong`` and gives an empty output line,
so output lines stay aligned with input lines; the command goes on and exits with status 1. The
progress bar is drawn only when stderr is a terminal. ``--format json`` writes one object per line
instead: the best hypothesis's ``ids``, ``text``, ``score`` and ``normalized_score``
(:mod:`seqjit.commands.scores`), the n-best in ``hypotheses`` (``--num-hypotheses``) and ``error``.
``--target-prefix`` forces the first output tokens of every line (text tokenized as the target,
or ids), then decoding goes on freely; the output includes them.
``--output`` is written to a temporary file
renamed into place when the run ends, and may not name the input file (nor a link to it).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from seqjit.commands import ray_run
from seqjit.commands.messages import Reporter, hint_terminal_stdin, is_terminal
from seqjit.commands.output import STDIO, output_stream, refuse_input_as_output
from seqjit.commands.scores import both_scores, output_length
from seqjit.text.batching import Failed, check_input, count_lines, process, read_lines
from seqjit.text.lines import line_records, resolve_max_length
from seqjit.text.hf_tokenizer import TOKENIZER_JSON, HFTokenizerCodec
from seqjit.text.translation import codec_for, load_any, target_language


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "translate", help="run a model over a file of token ids or text, one source per line",
        description="Run a seqjit model over INPUT, one source per line, and write one output line per input line. "
                    "Lines hold space-separated token ids, or text when the model directory carries SentencePiece "
                    "files (source.spm, target.spm, vocab.json, as Marian models do).")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a seqjit model directory (config.json + model.safetensors) or a Hugging Face directory")
    p.add_argument("--input", default="-", metavar="FILE",
                   help="one source per line (default: - , stdin): a file, or a FIFO or pipe read as a stream like "
                        "stdin (a device is refused); a UTF-8 byte order mark is dropped; a line of more than "
                        "1 MiB is an error that stops the run")
    p.add_argument("--output", default="-", metavar="FILE", help="one result per line (default: - , stdout)")
    p.add_argument("--beam-size", type=int, default=1, metavar="N", help="beam width (default: 1, greedy)")
    p.add_argument("--max-length", type=int, default=None, metavar="N",
                   help="at most N generated tokens per source, end token included (default: 256, or the model's "
                        "max_positions when smaller)")
    p.add_argument("--min-length", type=int, default=0, metavar="N",
                   help="the end token is forbidden before N generated tokens (default: 0; JoeyNMT's searches: 1)")
    p.add_argument("--max-input-length", type=int, default=0, metavar="N",
                   help="a line of more than N source tokens is an error for that line, or with --truncate-input "
                        "is cut to its first N (JSON: \"truncated\": true) (default: 0, no limit)")
    p.add_argument("--truncate-input", action="store_true",
                   help="cut lines longer than --max-input-length instead of refusing them")
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
    p.add_argument("--target-prefix", default=None, metavar="TEXT",
                   help="the first output tokens of every line, then free decoding (CTranslate2's target_prefix): "
                        "text, tokenized as the target is, or space-separated token ids with --ids or a model "
                        "without text files; the output includes them")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    ray_run.add_arguments(p)
    p.set_defaults(func=run)


def records(path, model, codec, max_positions):
    return line_records(read_lines(path), model, codec, max_positions)


def json_line(result, error, codec, *, beam: bool, max_length: int) -> str:
    """One ``--format json`` line: the best hypothesis's ids, text and scores, the n-best, the error
    (a blank text line: no hypotheses and no error)."""
    hypotheses = []
    for ids, score in zip(result.ids, result.scores) if result is not None else ():
        ids = [int(i) for i in ids]
        hypotheses.append({"ids": ids, "text": codec.decode(ids) if codec is not None else None,
                           **both_scores(score, output_length(ids, max_length), beam=beam)})
    best = hypotheses[0] if hypotheses else {"ids": None, "text": None, "score": None, "normalized_score": None}
    truncated = {"truncated": True} if getattr(result, "truncated", False) else {}
    return json.dumps({**best, "hypotheses": hypotheses, "error": error, **truncated}, ensure_ascii=False)


# -- the command -----------------------------------------------------------------------------------
def target_lang_options(args, directory, model, codec) -> dict:
    """``generate``'s options for ``--target-lang`` (with or without --ray): text read with a
    tokenizer.json only."""
    code = getattr(args, "target_lang", None)
    if code is not None and not isinstance(codec, HFTokenizerCodec):
        raise ValueError(f"--target-lang needs text read with a {TOKENIZER_JSON} (none in {directory}, or --ids given)")
    return target_language(directory, model, codec, code)


def target_prefix(args, model, codec) -> list | None:
    """``--target-prefix`` as target ids (None when not given): text through the codec's target side,
    or space-separated decimal ids without a codec; each id in the target vocabulary."""
    text = getattr(args, "target_prefix", None)
    if text is None:
        return None
    if codec is None:
        words = text.split()
        if not all(w.isascii() and w.isdigit() for w in words):
            raise ValueError(f"--target-prefix must hold space-separated token ids (decimal digits) when lines hold "
                             f"ids, got {text[:60]!r}")
        ids = [int(w) for w in words]
    elif hasattr(codec, "encode_target"):
        ids = codec.encode_target(text)
    else:
        raise ValueError(f"--target-prefix as text needs SentencePiece files or a {TOKENIZER_JSON} (give --ids and "
                         "token ids instead)")
    vocab = model.target_vocab_size
    outside = [i for i in ids if vocab is not None and not 0 <= i < vocab]
    if outside:
        raise ValueError(f"--target-prefix holds token id {outside[0]}, outside the target vocabulary [0, {vocab})")
    return ids


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
    min_length = getattr(args, "min_length", 0)
    if min_length < 0:
        raise ValueError(f"--min-length must be 0 or more, got {min_length}")
    if min_length and args.ray is not None:
        raise ValueError("--min-length is not supported with --ray yet")
    max_input = getattr(args, "max_input_length", 0)
    if max_input < 0:
        raise ValueError(f"--max-input-length must be 0 or more, got {max_input}")
    if (max_input or getattr(args, "truncate_input", False)) and args.ray is not None:
        raise ValueError("--max-input-length and --truncate-input are not supported with --ray yet")
    if json_out and args.ray is not None:
        raise ValueError("--format json is not supported with --ray yet")
    if getattr(args, "target_prefix", None) is not None and args.ray is not None:
        raise ValueError("--target-prefix is not supported with --ray yet")
    check_input(args.input)  # missing, a directory or a device: an error before the model loads
    refuse_input_as_output(args.input, args.output)

    if args.ray is not None:
        ray_run.check(args)  # Ray itself, before the model loads
    directory = Path(args.model)
    model = load_any(directory)
    codec = codec_for(directory, model, ids=args.ids)
    forced = target_lang_options(args, directory, model, codec)
    prefix = target_prefix(args, model, codec)
    if args.ray is not None:
        return ray_run.run_translate(args, directory, model, codec, forced)
    max_positions = getattr(model.config, "max_positions", None)
    max_length = resolve_max_length(args.max_length, max_positions)
    options = dict(beam_size=args.beam_size, max_length=max_length, min_length=min_length, num_hypotheses=hypotheses,
                   return_scores=json_out, max_input_length=max_input,
                   truncate_input=bool(getattr(args, "truncate_input", False)), **forced)

    def run_batch(items):
        try:
            given = {} if prefix is None else {"target_prefix": [prefix] * len(items)}
            return [r if json_out else r.ids[0]
                    for r in model.generate(items, max_batch_size=len(items), **given, **options)]
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
