"""Weights checked against an architecture's declared spec (name -> TensorSpec), with errors that name
every missing, unexpected, misshapen or wrongly typed weight: used when a model is built
(:class:`~seqjit.models.base.Seq2SeqModel`) and when a weights file's header is read
(:mod:`seqjit.models.weights_file`)."""
from __future__ import annotations

import numpy as np

from seqjit.errors import ModelFormatError
from seqjit.kernels._aligned import aligned


def check_weights(weights: dict, spec: dict, source: str) -> dict:
    """``weights`` checked against ``spec`` (name -> TensorSpec); one ModelFormatError lists every
    missing, unexpected, misshapen or wrongly typed weight, naming ``source``."""
    if not isinstance(weights, dict):
        raise TypeError(f"weights must be a dict of name -> numpy.ndarray, got {type(weights).__name__}")
    problems = name_problems(spec, weights)
    checked = {}
    for name, want in spec.items():
        if name not in weights:
            continue
        arr = weights[name]
        if not isinstance(arr, np.ndarray):
            problems.append(f"{name} is a {type(arr).__name__}, not a numpy.ndarray")
            continue
        if tuple(arr.shape) != tuple(want.shape):
            problems.append(f"{name} has shape {list(arr.shape)}, expected {list(want.shape)}")
        elif arr.dtype != want.dtype:
            problems.append(f"{name} has dtype {arr.dtype}, expected {np.dtype(want.dtype).name}")
        else:
            checked[name] = aligned(np.ascontiguousarray(arr))  # whole cache lines for the kernels' loads
    if problems:
        raise ModelFormatError(f"{source}: " + "; ".join(problems))
    return checked


def name_problems(spec: dict, names) -> list:
    """The messages for weights of ``spec`` missing from ``names`` and names ``spec`` lacks."""
    problems = []
    missing = [n for n in spec if n not in names]
    unexpected = [n for n in names if n not in spec]
    if missing:
        problems.append(f"missing weight(s): {name_listing(missing)}")
    if unexpected:
        problems.append(f"unexpected weight(s): {name_listing(unexpected)}")
    return problems


def name_listing(names: list, limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" ... and {len(names) - limit} more" if len(names) > limit else "")
