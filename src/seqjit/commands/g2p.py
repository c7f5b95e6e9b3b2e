"""``seqjit g2p``: pronounce words with a bundled G2P model (or any G2P model directory).

    seqjit g2p hello world                        # word<TAB>phonemes, one line each
    seqjit g2p --model attention --beam-size 4 seqjit
    seqjit g2p --input words.txt --output phonemes.txt

Files: one word per line; output lines stay aligned with input lines. A character the model does
not know is read as ``<unk>`` and reported (kept, never dropped); a line that cannot be read (not
UTF-8, or empty) gets an empty output line and a message, and the exit status is then 1.
"""
from __future__ import annotations

import sys

from seqjit.commands.batching import Record, count_lines, process, progress_bar, read_lines


def register(sub) -> None:
    from seqjit.g2p.predictor import BUNDLED, DEFAULT_MODEL

    p = sub.add_parser("g2p", help="words to phonemes with the bundled G2P models", description=__doc__,
                       formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("words", nargs="*", help="words to pronounce (or use --input)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"bundled model ({', '.join(BUNDLED)}) or a model directory "
                   f"(default {DEFAULT_MODEL})")
    p.add_argument("--input", help="file of words, one per line ('-': stdin)")
    p.add_argument("--output", default="-", help="output file (default stdout)")
    p.add_argument("--beam-size", type=int, default=1)
    p.add_argument("--max-length", type=int, default=None, help="most phonemes per word (default 2 x letters + 4)")
    p.add_argument("--max-batch-tokens", type=int, default=4096, help="padded letters per batch (default 4096)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _records(args):
    if args.input is None:
        for i, word in enumerate(args.words):
            yield Record(i, i + 1, word, len(word)) if word.strip() else Record(i, i + 1, error="empty word")
        return
    for i, (line, text, error) in enumerate(read_lines(args.input)):
        if error is None and not text.strip():
            error = "empty line (no word)"
        yield Record(i, line, None if error else text.strip(), 0 if error else len(text.strip()), error)


def run(args) -> int:
    from seqjit.g2p import G2P

    if args.input is None and not args.words:
        raise ValueError("g2p: give words or --input FILE")
    if args.input is not None and args.words:
        raise ValueError("g2p: give words or --input FILE, not both")
    if args.beam_size < 1:
        raise ValueError(f"--beam-size must be at least 1, got {args.beam_size}")
    if args.max_length is not None and args.max_length < 1:
        raise ValueError(f"--max-length must be at least 1, got {args.max_length}")
    if args.input not in (None, "-"):
        open(args.input, "rb").close()  # a missing file fails here, before the model loads
    g2p = G2P(args.model)
    where = args.input or "argv"
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    bar = progress_bar(count_lines(args.input) if args.input else None,
                       enabled=args.input is not None and not args.quiet and out is not sys.stdout, unit="word")
    failures = 0

    def run_batch(words):
        return g2p.predict(words, beam_size=args.beam_size, max_length=args.max_length)

    def emit(record, result):
        nonlocal failures
        if record.error is not None:
            failures += 1
            print(f"seqjit: {where}:{record.line}: {record.error}", file=sys.stderr)
            out.write("\n")
        else:
            if result.unknown:
                chars = ", ".join(repr(c) for c in dict.fromkeys(result.unknown))
                print(f"seqjit: {where}:{record.line}: {result.word!r} has character(s) {chars} the model does not know; "
                      "read as <unk>", file=sys.stderr)
            out.write(f"{result.word}\t{' '.join(result.phonemes)}\n")
        out.flush()

    try:
        process(_records(args), run_batch, emit, max_tokens=args.max_batch_tokens, progress=bar.update)
    finally:
        bar.close()
        if out is not sys.stdout:
            out.close()
    if failures:
        print(f"seqjit: {failures} line(s) could not be read (empty output lines in their place)", file=sys.stderr)
        return 1
    return 0
