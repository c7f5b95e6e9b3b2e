"""NumPy reference for the pointwise activations: the readable specification.

``gelu(x) = x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))``; with ``approximate="tanh"``,
``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``. ``silu(x) = x * sigmoid(x)``.
Computed in float64 and rounded once to the input dtype.
"""
from __future__ import annotations

import math

import numpy as np

from . import spec


#: the error function, elementwise (``math.erf``: correctly rounded to a few ulp; numpy has none)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x64: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow: ``exp(-log(1 + exp(-x)))``."""
    return np.exp(-np.logaddexp(0.0, -x64))


def apply(x64: np.ndarray, code: int) -> np.ndarray:
    """Activation ``code`` (see spec.ACTIVATIONS) applied to a float64 array."""
    if code == spec.NONE:
        return x64
    if code == spec.RELU:
        return np.maximum(x64, 0.0)
    if code == spec.GELU:
        return 0.5 * x64 * (1.0 + _erf(x64 * spec.SQRT_HALF))
    if code == spec.GELU_TANH:
        return 0.5 * x64 * (1.0 + np.tanh(spec.SQRT_2_OVER_PI * (x64 + 0.044715 * x64**3)))
    if code == spec.SILU:
        return x64 * _sigmoid(x64)
    if code == spec.TANH:
        return np.tanh(x64)
    raise ValueError(f"unknown activation code {code}")


def _run(x, out, code):
    x1, o1, result = spec.prepare(x, out)
    o1[...] = apply(x1.astype(np.float64), code)
    return result


def relu(x, *, out=None):
    """max(x, 0), elementwise."""
    return _run(x, out, spec.RELU)


def gelu(x, *, approximate="none", out=None):
    """GELU, elementwise: exact (erf) form, or the tanh approximation with ``approximate="tanh"``."""
    return _run(x, out, spec.gelu_code(approximate))


def silu(x, *, out=None):
    """x * sigmoid(x), elementwise."""
    return _run(x, out, spec.SILU)


def tanh(x, *, out=None):
    """tanh(x), elementwise."""
    return _run(x, out, spec.TANH)
