"""Arrays derived from constants (merged or transposed weights), shared between graphs.

A model builds several graphs from the same weight arrays (encoder, decoder step, decoder step with
attention, full decoder); passes that derive new constants from weights go through :func:`derived`
so each derived array exists once. Entries hold weak references to their sources and disappear
with them.
"""
from __future__ import annotations

import weakref

import numpy as np

from seqjit.kernels._aligned import aligned

_CACHE: dict = {}


def derived(sources: list, tag, make) -> np.ndarray:
    """``make()`` (a read-only array computed from ``sources``), cached per (sources, tag)."""
    key = (tuple(id(a) for a in sources), tag)
    hit = _CACHE.get(key)
    if hit is not None and all(ref() is a for ref, a in zip(hit[0], sources)):
        return hit[1]
    value = aligned(np.ascontiguousarray(make()))  # the kernels read it in whole cache lines
    value.flags.writeable = False
    try:
        refs = tuple(weakref.ref(a) for a in sources)
    except TypeError:
        return value
    _CACHE[key] = (refs, value)
    weakref.finalize(sources[0], _CACHE.pop, key, None)
    return value
