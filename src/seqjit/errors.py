"""Typed errors raised by seqjit outside the kernels (kernels raise plain TypeError/ValueError)."""
from __future__ import annotations


class ModelFormatError(ValueError):
    """A model directory or file is missing, unreadable, truncated, corrupted, or does not match the
    architecture's declared weights. The message names the file and what was expected."""


class ConfigError(ValueError):
    """A model configuration holds an unknown key, a missing key, or a value of the wrong kind."""


class GraphError(ValueError):
    """A graph is malformed: undefined or doubly defined value, cycle, unknown op or attribute."""


class ShapeError(ValueError):
    """Inputs given to a graph (or a node's inputs) do not have the shapes or dtypes it needs."""
