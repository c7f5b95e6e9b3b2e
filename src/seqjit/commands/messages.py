"""stderr for the file commands: one message format and a progress bar that never garbles it.

Every message reads ``seqjit: FILE:LINE: what is wrong`` (FILE is ``<stdin>`` or ``<argv>`` for
words given on the command line) or ``seqjit: what happened`` for the run as a whole. The progress
bar is drawn only when stderr is a terminal (a log file or a pipe gets the messages alone), and
while it is drawn the messages are written through it (``tqdm.write``), so each stays on its line.
"""
from __future__ import annotations

import sys

from seqjit.text.lines import QUOTE_LIMIT, quoted  # noqa: F401 - commands quote input through here too


class Reporter:
    """Messages about ``source`` (a file name, ``<stdin>``, ``<argv>``) and, when ``bar`` is asked
    for and stderr is a terminal, a tqdm progress bar of ``total`` lines (None: unknown)."""

    def __init__(self, source: str, *, bar: bool, total=None, unit: str = "line"):
        self.source = source
        self._bar = None
        if bar and is_terminal(sys.stderr):
            try:
                from tqdm import tqdm
            except ModuleNotFoundError:
                return
            self._bar = tqdm(total=total() if callable(total) else total, unit=unit, dynamic_ncols=True, leave=False,
                             file=sys.stderr)

    def line(self, number: int, message: str) -> None:
        """``seqjit: SOURCE:NUMBER: message``."""
        self.note(f"{self.source}:{number}: {message}")

    def note(self, message: str) -> None:
        """``seqjit: message``."""
        text = f"seqjit: {message}"
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def hint_terminal_stdin(what: str) -> None:
    """When stdin is a terminal, say on stderr that the command now waits for typed ``what`` (else
    it looks hung)."""
    if is_terminal(sys.stdin):
        print(f"seqjit: reading {what} from the terminal, one per line; end with Ctrl-D", file=sys.stderr, flush=True)


def plain(doc: str) -> str:
    """A module docstring as ``--help`` text: without reStructuredText markup (double backquotes,
    ``:func:`name``` roles), which a terminal shows literally."""
    import re

    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    return doc.replace("``", "")


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False
