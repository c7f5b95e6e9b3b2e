"""16-bit float weights held as their raw bits: a ``uint16`` array and the name of its format.

NumPy has ``float16`` but no ``bfloat16``, so seqjit keeps both formats the same way, as ``uint16``
words, with the format (``"float16"`` or ``"bfloat16"``) named beside them: by the model's
``quantization`` in its config, by the ``fmt`` attribute of the graph ops that read them
(``linear_half``, ``embedding_half``), and by the safetensors dtype code in a weights file (``F16``,
``BF16``; never an anonymous ``U16``). Widening to float32 is exact for both formats.
"""
from __future__ import annotations

import numpy as np

#: format name -> its safetensors dtype code
CODES = {"float16": "F16", "bfloat16": "BF16"}
#: safetensors dtype code -> format name
FORMATS = {code: fmt for fmt, code in CODES.items()}
#: format name -> the exponent field of its bit pattern (all ones: Inf or NaN)
_EXPONENT = {"float16": 0x7C00, "bfloat16": 0x7F80}


def check_format(fmt) -> str:
    if fmt not in CODES:
        raise ValueError(f"16-bit format must be one of {list(CODES)}, got {fmt!r}")
    return fmt


def widen(bits: np.ndarray, fmt: str) -> np.ndarray:
    """float32 values of the 16-bit words ``bits`` in format ``fmt`` (exact: both formats are subsets
    of float32)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    if check_format(fmt) == "float16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def count_nonfinite(bits: np.ndarray, fmt: str) -> int:
    """How many of the 16-bit words ``bits`` in format ``fmt`` are Inf or NaN."""
    e = np.uint16(_EXPONENT[check_format(fmt)])
    return int(np.count_nonzero((bits & e) == e))


__all__ = ["CODES", "FORMATS", "check_format", "widen", "count_nonfinite"]
