"""Helpers for tests that hand seqjit a FIFO, ``/dev/zero`` or a planted link as a path: such a test
must fail (not hang, not eat the host's memory) when the code under test regresses.

- :func:`deadline`: a SIGALRM that raises in the block after ``seconds`` (a blocked ``open`` or
  ``read`` of a FIFO is interrupted: Python raises the handler's exception instead of retrying);
- :func:`run_bounded`: Python code in a child process with a time limit and a cap on its data
  memory, for what could read forever (``/dev/zero``): a regression is a failed run, not an
  exhausted host.
"""
import contextlib
import os
import resource
import signal
import subprocess
import sys

class Timeout(AssertionError):
    pass


@contextlib.contextmanager
def deadline(seconds: int):
    def stop(signum, frame):
        raise Timeout(f"still running after {seconds} s (blocked on a FIFO, or reading forever)")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_bounded(code: str, *, seconds: int = 60, memory: int = 2 << 30, stdin=None) -> subprocess.CompletedProcess:
    """``python -c code`` with the tests' import path, at most ``seconds`` and ``memory`` bytes of data."""

    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # seqjit as the tests import it
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=seconds,
                              preexec_fn=limit, env=env, stdin=stdin)
    except subprocess.TimeoutExpired:
        raise Timeout(f"the child ran past {seconds} s (blocked, or reading forever)") from None
