"""Position ops of the fairseq-style Transformers (M2M100 / NLLB): the sinusoidal table in fairseq's
layout and positions that count non-padding tokens only. NumPy glue: the table is a constant
(folded once per graph), the gather is one indexing step per encoder call or teacher-forced pass.

``fairseq_positions``: ``() -> [length, dim]``, row ``p`` = ``[sin(p * f_0..f_{h-1}), cos(p * f_0..f_{h-1})]``
with ``h = dim / 2`` and ``f_i = exp(-i * log(10000) / (h - 1))`` (``M2M100SinusoidalPositionalEmbedding
.get_embedding``; note ``h - 1``, where Marian's "halves" layout divides by ``h``). Computed in float32
as fairseq and ``transformers`` compute it, so the table equals theirs to the last bit or two.

``padded_positions``: ``table [P, E], ids [B, L] -> [B, L, E]``: a token that is not ``pad_id`` gets row
``offset - 1 + k`` where ``k`` counts the non-pad tokens up to and including it (``create_position_ids
_from_input_ids``: with ``offset = pad_id + 1`` the first real token gets row ``pad_id + 1``); a pad
token gets zeros (the table's zeroed ``padding_idx`` row in ``transformers``).
"""
from __future__ import annotations

import math

import numpy as np

from seqjit.graph.ops import REQUIRED, OpDef, TensorSpec, need, register


def fairseq_table(length: int, dim: int, dtype=np.float32) -> np.ndarray:
    """The ``[length, dim]`` table described in the module docstring (``dim`` even, >= 4)."""
    half = dim // 2
    freq = np.exp(np.arange(half, dtype=np.float32) * np.float32(-math.log(10000) / (half - 1)))
    angle = np.arange(length, dtype=np.float32)[:, None] * freq[None, :]
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1).astype(dtype)


def _table_infer(specs, attrs):
    length, dim = int(attrs["length"]), int(attrs["dim"])
    need(dim % 2 == 0 and dim >= 4, "fairseq_positions", f"dim must be even and >= 4, got {dim}")
    need(length >= 0, "fairseq_positions", f"length must be >= 0, got {length}")
    return [TensorSpec((length, dim), np.dtype(attrs["dtype"]))]


def _table_make(ctx):
    a = ctx.attrs
    return lambda: fairseq_table(int(a["length"]), int(a["dim"]), np.dtype(a["dtype"]))


register(OpDef("fairseq_positions", (), _table_infer, _table_make,
               attrs={"length": REQUIRED, "dim": REQUIRED, "dtype": "float32"}, modes=lambda specs, attrs: ["fresh"]))


def _padded_infer(specs, attrs):
    table, ids = specs
    where = "padded_positions"
    need(len(table.shape) == 2, where, f"table must be [P, E], got {table}")
    need(len(ids.shape) == 2 and np.dtype(ids.dtype).kind in "iu", where, f"ids must be integer [B, L], got {ids}")
    offset, length, p = int(attrs["offset"]), ids.shape[1], table.shape[0]
    need(offset >= 1, where, f"offset must be >= 1, got {offset}")
    need(offset - 1 + length <= p, where,
         f"sequence length {length} exceeds the model's {p - offset + 1} positions (max_positions)")
    return [TensorSpec(tuple(ids.shape) + (table.shape[1],), table.dtype)]


def _padded_make(ctx):
    pad, offset = int(ctx.attrs["pad_id"]), int(ctx.attrs["offset"])
    out_buf = ctx.outs[0] if ctx.outs else None

    def padded_positions(table, ids):
        real = ids != pad
        rows = np.cumsum(real, axis=1) + (offset - 1)
        out = out_buf if out_buf is not None else np.empty(ids.shape + (table.shape[1],), table.dtype)
        np.take(table, rows, axis=0, out=out)
        out[~real] = 0
        return out

    return padded_positions


register(OpDef("padded_positions", ("table", "ids"), _padded_infer, _padded_make,
               attrs={"pad_id": REQUIRED, "offset": REQUIRED}))
