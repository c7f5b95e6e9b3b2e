"""The ``seqjit`` command line (also ``python -m seqjit``).

Each subcommand is a module of :mod:`seqjit.commands` with ``register(subparsers)``, which adds its
parser and sets ``func(args) -> exit status`` (``seqjit score`` is ``score_targets``; ``scores`` holds
translate's output scores). Errors a user can fix (a missing model directory, a bad argument) print
one ``seqjit: error: ...`` line and exit with status 2. ``--threads N`` is accepted before or after
the subcommand; ``--version`` prints the version.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from seqjit.errors import ConfigError, ModelFormatError

COMMANDS = ("demo", "g2p", "translate", "score_targets", "convert", "inspect", "bench")


THREADS_HELP = "threads for Numba, OpenMP and BLAS (default: all cores)"


def positive_int(text: str) -> int:
    """A ``--threads`` count: plain decimal digits, 1 to :data:`~seqjit.kernels._threads.MAX_THREADS`."""
    from seqjit.kernels._threads import MAX_THREADS

    shown = text if len(text) <= 40 else text[:40] + "..."
    if not (text.isascii() and text.strip().lstrip("+-").isdigit()):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {shown!r}")
    value = int(text) if len(text.strip()) <= 40 else MAX_THREADS + 1
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_THREADS} threads, got {shown}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from seqjit import __version__

    parser = argparse.ArgumentParser(prog="seqjit", description="Framework-free seq2seq inference.")
    parser.add_argument("--version", action="version", version=f"seqjit {__version__}")
    parser.add_argument("--threads", type=positive_int, default=None, metavar="N", help=THREADS_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"seqjit.commands.{name}").register(sub)
    for command in sub.choices.values():  # also after the subcommand; SUPPRESS keeps a value given before it
        if "--threads" not in command._option_string_actions:  # bench has its own (threads per engine)
            command.add_argument("--threads", type=positive_int, default=argparse.SUPPRESS, metavar="N",
                                 help=THREADS_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads is not None:
        from seqjit import set_num_threads

        set_num_threads(args.threads)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError, ModelFormatError, ConfigError, ModuleNotFoundError) as exc:
        if isinstance(exc, BrokenPipeError):  # the reader went away (``seqjit g2p ... | head``): not an error
            sys.stderr.close()
            return 0
        print(f"seqjit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("seqjit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
