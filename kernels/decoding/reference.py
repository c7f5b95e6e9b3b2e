"""NumPy reference for greedy_argmax: the readable specification (see :mod:`spec`)."""
from __future__ import annotations

import numpy as np

from . import spec


def greedy_argmax(logits, *, suppressed=(), eos_id=-1, step=0, min_length=0, out=None):
    """The greedy token of each row of ``logits`` ``[R, V]``: forbidden tokens -inf, then numpy.argmax."""
    logits, suppressed, ban_id, result = spec.prepare(logits, suppressed, eos_id, step, min_length, out)
    scores = np.array(logits, copy=True)
    scores[:, suppressed] = -np.inf
    if ban_id >= 0:
        scores[:, ban_id] = -np.inf
    result[...] = np.argmax(scores, axis=-1)
    return result
