"""Batching by tokens with output streamed in input order, for the file commands and the Ray predictors.

:func:`process` reads records a pool at a time, sorts each pool by length, cuts it into batches of
at most ``max_tokens`` (longest record x batch size, the padded size) and runs them; each result is
emitted as soon as every earlier record's result is out, so output appears while input is still
being read and a long file never sits in memory whole. A record that could not be read (``error``
set) is emitted in its place without being run.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable, Iterable


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


def read_lines(path, *, encoding: str = "utf-8"):
    """``(line number, text or None, error or None)`` for each line of ``path`` (``-``: stdin);
    a line that is not valid ``encoding`` text gives an error instead of stopping the file."""
    import sys

    stream = sys.stdin.buffer if str(path) == "-" else open(path, "rb")
    try:
        for number, raw in enumerate(stream, 1):
            try:
                yield number, raw.decode(encoding).rstrip("\r\n"), None
            except UnicodeDecodeError as exc:
                yield number, None, f"not valid {encoding} text ({exc.reason} at byte {exc.start})"
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def check_input(path) -> None:
    """An error now (before a model loads) when ``path`` is missing, a directory or unreadable,
    without opening it: a FIFO opened and closed here would lose its writer's data, and the later
    open for reading would then wait forever for another writer."""
    import os
    import stat

    if str(path) == "-":
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"the input file {path} does not exist") from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"the input {path} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"the input file {path} cannot be read (permission denied)")


def count_lines(path) -> int | None:
    """Lines in a regular file (for the progress bar); None for stdin and anything else (a FIFO or
    a device can be read only once: counting would eat the input)."""
    import os
    import stat

    try:
        if str(path) == "-" or not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except OSError:
        return None
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))

