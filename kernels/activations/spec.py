"""Pointwise activations (relu, gelu, silu, tanh): argument checks and output allocation.

Every op maps ``x`` of any shape to an array of the same shape and dtype. The activation names are
shared with :mod:`seqjit.kernels.linear`, which fuses them into its GEMM epilogue.
"""
from __future__ import annotations

import math

from seqjit.kernels import _checks

#: activation name -> the integer code the kernels switch on
NONE, RELU, GELU, GELU_TANH, SILU, TANH = 0, 1, 2, 3, 4, 5
ACTIVATIONS: dict = {None: NONE, "relu": RELU, "gelu": GELU, "gelu_tanh": GELU_TANH, "silu": SILU, "tanh": TANH}

#: sqrt(1/2) and sqrt(2/pi), the gelu constants
SQRT_HALF = 0.7071067811865476
SQRT_2_OVER_PI = 0.7978845608028654


def activation_code(activation) -> int:
    """The kernel code of ``activation`` (None, "relu", "gelu", "gelu_tanh", "silu" or "tanh")."""
    try:
        return ACTIVATIONS[activation]
    except (KeyError, TypeError):
        names = ", ".join(repr(k) for k in ACTIVATIONS)
        raise ValueError(f"activation must be one of {names}, got {activation!r}") from None


def gelu_code(approximate) -> int:
    """GELU for ``approximate="none"`` (erf form), GELU_TANH for ``"tanh"`` (as ``F.gelu``)."""
    if approximate == "none":
        return GELU
    if approximate == "tanh":
        return GELU_TANH
    raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")


def prepare(x, out, *, device: bool = False):
    """Check the arguments; return ``(x1d, out1d, result)``.

    ``x1d`` is ``x`` flattened to ``[n]``; ``out1d`` a flat view of ``result`` (``out`` itself when
    given; it may be ``x`` for an in-place update). With ``device=True`` (cuda backend) no host
    output is made: ``out1d`` is None and ``result`` is the shape.
    """
    shape = tuple(getattr(x, "shape", ()))  # float_array turns a 0-d array into shape (1,)
    x = _checks.float_array("x", x)
    n = math.prod(shape)
    if device:
        return x.reshape(n), None, shape
    result = _checks.out_array("out", out, shape, x.dtype)
    return x.reshape(n), result.reshape(n), result
