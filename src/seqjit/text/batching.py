"""Batching by tokens with output streamed in input order, for the file commands and the Ray predictors.

:func:`process` reads records a pool at a time, sorts each pool by length, cuts it into batches of
at most ``max_tokens`` (longest record x batch size, the padded size) and runs them; each result is
emitted as soon as every earlier record's result is out, so output appears while input is still
being read and a long file never sits in memory whole. A record that could not be read (``error``
set) is emitted in its place without being run.
"""
from __future__ import annotations

import heapq
import os
import stat
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from seqjit.errors import InputError


@dataclass
class Record:
    index: int  # 0-based position in the input
    line: int  # 1-based line number in the input, for messages
    item: Any = None  # what run_batch takes (e.g. token ids)
    length: int = 0
    error: str | None = None  # why the line could not be read (then item is None)


class Failed:
    """The result of a record that could not be decoded: its batch's error, found by running it alone."""

    def __init__(self, message: str):
        self.message = message


def token_batches(records: list, max_tokens: int, max_batch: int) -> list:
    """Lists of records, sorted by length, each of at most ``max_tokens`` padded tokens (a record
    longer than ``max_tokens`` alone) and ``max_batch`` records."""
    if max_tokens < 1 or max_batch < 1:
        raise ValueError(f"max_tokens and max_batch must be positive, got {max_tokens} and {max_batch}")
    batches, current, longest = [], [], 0
    for r in sorted(records, key=lambda r: r.length):
        size = max(r.length, 1)
        if current and (max(longest, size) * (len(current) + 1) > max_tokens or len(current) == max_batch):
            batches.append(current)
            current, longest = [], 0
        current.append(r)
        longest = max(longest, size)
    if current:
        batches.append(current)
    return batches


def process(records: Iterable, run_batch: Callable, emit: Callable, *, max_tokens: int = 4096, max_batch: int = 256,
            pool: int = 2048, progress: Callable | None = None) -> None:
    """Run ``run_batch(list of items) -> list of results`` over ``records`` and call
    ``emit(record, result)`` in input order (``result`` None for a record with an error).
    ``progress(n)`` is called with the number of records emitted by each flush."""
    ready: list = []  # heap of (index, record, result)
    next_index = 0

    def flush():
        nonlocal next_index
        count = 0
        while ready and ready[0][0] == next_index:
            _, record, result = heapq.heappop(ready)
            emit(record, result)
            next_index += 1
            count += 1
        if progress and count:
            progress(count)

    def run_pool(items):
        good = [r for r in items if r.error is None]
        for r in items:
            if r.error is not None:
                heapq.heappush(ready, (r.index, r, None))
        flush()
        for batch in token_batches(good, max_tokens, max_batch):
            for r, result in zip(batch, run_batch([r.item for r in batch])):
                heapq.heappush(ready, (r.index, r, result))
            flush()

    buffer = []
    for record in records:
        buffer.append(record)
        if len(buffer) >= pool:
            run_pool(buffer)
            buffer = []
    if buffer:
        run_pool(buffer)


#: the longest input line read, in bytes (a source sentence or a word is far shorter): a longer one,
#: or a stream without line breaks (a FIFO fed from /dev/zero), is an InputError naming FILE:LINE
#: rather than memory growing without bound
MAX_LINE_BYTES = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"


def _kind(mode: int) -> str | None:
    """Why an input of this mode is refused (None: a regular file, a FIFO or a pipe, read as lines)."""
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a file (seqjit reads lines from a file, a FIFO or a pipe; '-' is stdin)"
    return "a socket or other special file, not a file"


def open_input(path):
    """A binary stream of input ``path`` (``-``: stdin): a regular file, or a FIFO or pipe read as a
    stream (as stdin; it waits for a writer as any reader of a FIFO does); a device (``/dev/zero``),
    a socket or a directory is refused before it is opened, and checked again once open."""
    if str(path) == "-":
        return sys.stdin.buffer
    check_input(path)
    stream = open(path, "rb")
    why = _kind(os.fstat(stream.fileno()).st_mode)
    if why is not None:
        stream.close()
        raise InputError(f"the input {path} is {why}")
    return stream


def read_lines(path, *, encoding: str = "utf-8", max_line_bytes: int = MAX_LINE_BYTES):
    """``(line number, text or None, error or None)`` for each line of ``path`` (``-``: stdin;
    :func:`open_input`); a line that is not valid ``encoding`` text gives an error instead of
    stopping the file; a UTF-8 byte order mark opening the input is dropped (it is not a letter of
    the first word); a line longer than ``max_line_bytes`` ends the read with an InputError naming
    FILE:LINE."""
    stream = open_input(path)
    name = "<stdin>" if str(path) == "-" else str(path)
    try:
        number = 0
        while True:
            raw = stream.readline(max_line_bytes + 1)
            if not raw:
                break
            number += 1
            if len(raw) > max_line_bytes and not (len(raw) == max_line_bytes + 1 and raw.endswith(b"\n")):
                raise InputError(f"{name}:{number}: the line is longer than {max_line_bytes} bytes (no line break "
                                 "within them): not one source per line")
            if number == 1 and raw.startswith(UTF8_BOM) and encoding.replace("-", "").replace("_", "").lower() in (
                    "utf8", "utf8sig"):
                raw = raw[len(UTF8_BOM):]
            try:
                yield number, raw.decode(encoding).rstrip("\r\n"), None
            except UnicodeDecodeError as exc:
                yield number, None, f"not valid {encoding} text ({exc.reason} at byte {exc.start})"
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def check_input(path) -> None:
    """An error now (before a model loads) when ``path`` is missing, a directory, a device or a socket,
    or unreadable, without opening it: a FIFO opened and closed here would lose its writer's data, and
    the later open for reading would then wait forever for another writer."""
    if str(path) == "-":
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"the input file {path} does not exist") from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"the input {path} is a directory, not a file")
    why = _kind(mode)
    if why is not None:
        raise InputError(f"the input {path} is {why}")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"the input file {path} cannot be read (permission denied)")


def count_lines(path) -> int | None:
    """Lines in a regular file (for the progress bar); None for stdin and anything else (a FIFO or
    a device can be read only once: counting would eat the input)."""
    try:
        if str(path) == "-" or not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except OSError:
        return None
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))

