"""greedy_argmax: a greedy decoding step's token choice, argument checks and output allocation.

``greedy_argmax(logits, *, suppressed=(), eos_id=-1, step=0, min_length=0, out=None)``

- ``logits`` ``[R, V]`` float, ``V >= 1``: one row of next-token scores per hypothesis.
- ``suppressed``: token ids never chosen (a sequence or integer array, each in ``[0, V)``). The cuda
  backend also takes an integer device array, used where it is (uploaded once by a decode loop): its
  values are not read on the host, and an id outside ``[0, V)`` there matches no token.
- ``eos_id`` (``-1``: none): the end token, not chosen while ``step < min_length`` (``step`` = the
  number of tokens generated so far), as :func:`seqjit.decoding.processors.apply_min_length`.

Per row, exactly what seqjit's CPU greedy step does (``processors.apply_min_length`` and
``apply_suppressed``, then ``numpy.argmax``): the forbidden tokens' scores become -inf; the result is
the first NaN left if there is one, else the first index of the largest score, and 0 when every
score is -inf.

Returns int64 ``[R]`` (``out`` itself when given).
"""
from __future__ import annotations

import numbers

import numpy as np

from seqjit.kernels import _checks


def _int(name: str, value, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def prepare(logits, suppressed, eos_id, step, min_length, out, *, device: bool = False):
    """Check every argument (naming it); return ``(logits, suppressed, ban_id, result)``.

    ``suppressed`` is an int64 host array (or the caller's device array with ``device=True``);
    ``ban_id`` the end token while it is forbidden, else -1; ``result`` the host output (the caller's
    ``out`` unchecked with ``device=True``).
    """
    logits = _checks.float_array("logits", logits, ndim=2)
    rows, vocab = (int(s) for s in logits.shape)
    if vocab < 1:
        raise ValueError(f"logits must have at least one column (V >= 1), got shape {list(logits.shape)}")
    eos_id = _int("eos_id", eos_id, -1)
    if eos_id >= vocab:
        raise ValueError(f"eos_id must lie in [-1, {vocab - 1}] (-1: no end token), got {eos_id}")
    step = _int("step", step, 0)
    min_length = _int("min_length", min_length, 0)
    if device and _checks.is_device_array(suppressed):
        if len(suppressed.shape) != 1 or np.dtype(suppressed.dtype).kind not in "iu":
            raise TypeError(f"suppressed must be a 1-d integer array, got {suppressed.dtype} {list(suppressed.shape)}")
    else:
        if suppressed is None:
            suppressed = ()
        elif isinstance(suppressed, (set, frozenset)):
            suppressed = sorted(suppressed)
        ids = np.asarray(suppressed)
        suppressed = _checks.int_array("suppressed", ids if ids.size else ids.astype(np.int64), ndim=1)
        if suppressed.size and (suppressed.min() < 0 or suppressed.max() >= vocab):
            raise ValueError(f"suppressed must hold token ids in [0, {vocab - 1}], got values from "
                             f"{suppressed.min()} to {suppressed.max()}")
    ban_id = eos_id if step < min_length else -1
    if device:
        return logits, suppressed, ban_id, out
    return logits, suppressed, ban_id, _checks.out_array("out", out, (rows,), np.dtype(np.int64))
