"""Where the file commands write: never over their input, never a half-written file in place.

:func:`refuse_input_as_output` stops ``--output`` naming the input file (the same file by device
and inode, so a symbolic or hard link to it too) before anything is opened for writing.
:func:`output_stream` writes a regular file through a temporary file in the same directory, renamed
over the target (``os.replace``, atomic) when the run ends: a crash leaves the old file as it was.
An interrupted run (KeyboardInterrupt) still renames what it wrote: complete lines, aligned with
the first input lines, as the commands promise. A terminated one (SIGTERM) removes its temporary
file and leaves the target as it was; a read-only target is refused, not replaced.
"""
from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path

STDIO = "-"


def _identity(path) -> tuple | None:
    """``(device, inode)`` of the regular file ``path`` (``-``: stdin), None when it is not one (a
    terminal, a pipe, ``/dev/null``), does not exist or cannot be told."""
    try:
        info = os.fstat(sys.stdin.fileno()) if str(path) == STDIO else os.stat(path)
    except (OSError, ValueError, AttributeError):  # no such file; stdin replaced by an object without a descriptor
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


def refuse_input_as_output(input_path, output_path) -> None:
    """ValueError when ``output_path`` is the input file itself (or a link to it)."""
    if str(output_path) == STDIO:
        return
    target = _identity(output_path)
    if target is not None and target == _identity(input_path):
        shown = "stdin" if str(input_path) == STDIO else f"the input file {input_path}"
        raise ValueError(f"--output {output_path} is {shown} (the same file): writing it would erase the input")


@contextlib.contextmanager
def output_stream(path):
    """A text stream (UTF-8, ``\\n`` line ends) for ``path``; ``-`` is stdout. A regular file (new or
    existing) is written to a hidden temporary file beside it and renamed into place when the block
    ends, normally or by KeyboardInterrupt; any other exception removes the temporary file and
    leaves ``path`` untouched. A path that exists and is not a regular file (``/dev/null``, a FIFO)
    is written directly. A symbolic link is followed: the file it points to is replaced."""
    if str(path) == STDIO:
        yield sys.stdout
        return
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(f"--output {path} is a directory, not a file")
    if mode is not None and not stat.S_ISREG(mode):
        with open(target, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        return
    if not target.parent.is_dir():
        raise FileNotFoundError(f"--output {path}: the directory {target.parent} does not exist")
    # renaming over it would succeed (the directory is writable); no write bit counts even for root
    if mode is not None and (not os.access(target, os.W_OK) or not mode & 0o222):
        raise PermissionError(f"--output {path} is read-only: not replaced (make it writable, or write elsewhere)")
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(fd, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream, _terminate_as_exit():
            try:
                yield stream
            except KeyboardInterrupt:
                stream.close()
                os.replace(temporary, target)
                raise
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM as ``SystemExit(143)`` in the block (main thread, default handler only), so the
    ``finally`` blocks run and the temporary file is removed instead of left behind."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
