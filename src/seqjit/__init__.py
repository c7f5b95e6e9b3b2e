"""seqjit: framework-free inference for seq2seq models (RNN, attention RNN, Transformer).

Kernels live in :mod:`seqjit.kernels` (NumPy reference, Numba, Cython, numba.cuda backends).
"""
from __future__ import annotations

__version__ = "0.1.0"

from seqjit.kernels._threads import get_num_threads, set_num_threads

__all__ = ["__version__", "get_num_threads", "set_num_threads"]
