"""``seqjit score``: the log-probability of given targets (``model.score``; CTranslate2's
``score_batch``), over two line-aligned files: sources (``--input``) and targets (``--target``).

Lines are read as ``seqjit translate`` reads its input: space-separated token ids (any model, or
``--ids``), or text where the model directory has SentencePiece files (``source.spm``,
``target.spm``, ``vocab.json``) or a ``tokenizer.json`` (targets: :mod:`seqjit.text.targets`). A
blank target line is an empty target (only the end token is scored); a blank source line is an error.

One JSON object per line out, in input order: ``ids`` (the scored tokens: the target, then the end
token), ``log_probs`` (one per id), ``score`` (their sum), ``normalized_score`` (divided by their
count) and ``error``. A line pair that cannot be scored (ids that do not parse or lie outside a
vocabulary, too long for the model, a line without a partner in the other file) gets an object
with its ``error`` set and the rest null; it is reported on stderr as ``seqjit: FILE:LINE: ...``,
the command goes on and exits with status 1.
"""
from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path

from seqjit.commands.messages import Reporter, hint_terminal_stdin, is_terminal
from seqjit.commands.output import STDIO, output_stream, refuse_input_as_output
from seqjit.text.batching import Failed, Record, check_input, count_lines, process, read_lines
from seqjit.text.lines import check_source_line, parse_ids
from seqjit.text.targets import target_encoder
from seqjit.text.translation import codec_for, load_any


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "score", help="score given targets: per-token log-probabilities of each target given its source",
        description="Score the targets of --target given the sources of --input (line-aligned files): one JSON "
                    "object per line with the log-probability of every target token and of the end token.")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a seqjit model directory (config.json + model.safetensors) or a Hugging Face directory")
    p.add_argument("--input", default="-", metavar="FILE", help="one source per line (default: - , stdin)")
    p.add_argument("--target", required=True, metavar="FILE",
                   help="one target per line, aligned with --input (a blank line: an empty target)")
    p.add_argument("--output", default="-", metavar="FILE", help="one JSON object per line (default: - , stdout)")
    p.add_argument("--max-batch-tokens", type=int, default=4096, metavar="N",
                   help="at most N padded tokens per batch (default: 4096)")
    p.add_argument("--max-batch-size", type=int, default=256, metavar="N", help="at most N pairs per batch (default: 256)")
    p.add_argument("--ids", action="store_true", help="read token ids even if the model has tokenizer files")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _finite(x: float):
    return x if math.isfinite(x) else None  # JSON has no NaN or Infinity


def json_line(result, error) -> str:
    if result is None:
        return json.dumps({"ids": None, "log_probs": None, "score": None, "normalized_score": None, "error": error})
    return json.dumps({"ids": result.ids, "log_probs": [_finite(x) for x in result.log_probs],
                       "score": _finite(result.score), "normalized_score": _finite(result.normalized_score),
                       "error": error}, ensure_ascii=False)


def pair_records(sources, targets, model, codec, encode_target, names):
    """Records of ``(source ids, target ids)`` from two ``(number, text, error)`` line streams."""
    max_positions = getattr(model.config, "max_positions", None)
    for number, (src, tgt) in enumerate(itertools.zip_longest(sources, targets), 1):
        error = None
        if src is None or tgt is None:
            missing, present = (names[0], names[1]) if src is None else (names[1], names[0])
            error = f"{present} has a line {number}, {missing} has no line {number} (the files must be line-aligned)"
        else:
            error = src[2] and f"{names[0]}: {src[2]}" or tgt[2] and f"{names[1]}: {tgt[2]}"
        if error is None:
            try:
                if not src[1].strip():
                    raise ValueError("empty source line: a target can only be scored given a source")
                source = codec.encode(src[1]) if codec is not None else parse_ids(src[1])
                check_source_line(source, model, max_positions)
                text = tgt[1]
                target = [] if not text.strip() else encode_target(text) if encode_target else parse_ids(text)
            except ValueError as exc:
                error = str(exc)
        if error is not None:
            yield Record(number - 1, number, error=error)
        else:
            yield Record(number - 1, number, item=(source, target), length=max(len(source), len(target) + 1))


def _positive(name: str, value) -> None:
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")


def run(args) -> int:
    _positive("--max-batch-tokens", args.max_batch_tokens)
    _positive("--max-batch-size", args.max_batch_size)
    if args.input == STDIO and args.target == STDIO:
        raise ValueError("--input and --target cannot both be stdin (-)")
    for path in (args.input, args.target):
        check_input(path)  # missing, a directory or a device: an error before the model loads
        refuse_input_as_output(path, args.output)
    directory = Path(args.model)
    model = load_any(directory)
    codec = codec_for(directory, model, ids=args.ids)
    encode_target = None
    if codec is not None:
        encode_target = target_encoder(codec, model)
        if encode_target is None:
            raise ValueError(f"{directory}'s tokenizer files give no target encoder for scoring; use --ids "
                             "and give target token ids")

    def run_batch(items):
        try:
            return model.score([s for s, _ in items], [t for _, t in items], max_batch_size=len(items))
        except (ValueError, TypeError, IndexError) as exc:
            if len(items) == 1:
                return [Failed(str(exc).replace("sources[0]", "the source").replace("targets[0]", "the target"))]
            return [run_batch([item])[0] for item in items]  # find the pair at fault

    names = tuple("<stdin>" if p == STDIO else p for p in (args.input, args.target))
    show_bar = not args.quiet and STDIO not in (args.input, args.target) and \
        (args.output != STDIO or not is_terminal(sys.stdout))
    reporter = Reporter(names[0], bar=show_bar, total=lambda: count_lines(args.input))
    bad = total = 0

    def emit(record, result):
        nonlocal bad, total
        total += 1
        if isinstance(result, Failed):
            record.error, result = result.message, None
        if record.error:
            bad += 1
            reporter.line(record.line, record.error)
        out.write(json_line(result, record.error) + "\n")
        out.flush()

    if STDIO in (args.input, args.target):
        hint_terminal_stdin("lines (or give a FILE)")
    records = pair_records(read_lines(args.input), read_lines(args.target), model, codec, encode_target, names)
    with output_stream(args.output) as out:
        try:
            process(records, run_batch, emit, max_tokens=args.max_batch_tokens, max_batch=args.max_batch_size,
                    progress=reporter.update)
        finally:
            reporter.close()
    if bad:
        reporter.note(f"{bad} of {total} line pair(s) could not be scored (objects with an \"error\" in their place)")
        return 1
    return 0
