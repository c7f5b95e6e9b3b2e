"""Quantized models: int8 (every ``linear`` weight and every GRU/LSTM matrix stored as int8 with one
float32 scale per output row), and 16-bit weights (``float16``, ``bfloat16``: the ``linear`` weights
and a Transformer's embedding tables stored as the raw bits of that format, no scales).

Format (a model directory like any other, ``config.json`` + ``model.safetensors``):

- ``config.json`` holds ``"quantization": "int8"`` (``"none"`` for float models);
- each quantized weight ``<name>`` is an int8 ``[N, K]`` tensor beside its float32 scales
  ``<name>.scale`` ``[N]``: ``W ~= <name> * <name>.scale[:, None]`` (symmetric per row, see
  :mod:`seqjit.kernels.linear_int8`). Quantized: every ``linear`` weight, a Transformer's token
  embedding tables (one scale per token row; a table tied to the output projection is that
  projection's int8 weight too), and the RNN matrices ``weight_ih_l*`` / ``weight_hh_l*`` of the
  encoder and decoder GRU/LSTM (one scale per gate row). Float32: layer norms, biases, position
  tables, RNN embeddings, Bahdanau's ``Wa``/``Va``.

Which weights are quantized follows from the architecture and config (:func:`int8_weight_names`),
so the weight spec of an int8 config names every int8 tensor and its scales, and loading checks them
like every other weight.

In the graphs a quantized weight makes the builders emit ``linear_int8`` (x, int8 weight, scale,
bias) instead of ``linear``, and ``embedding_int8`` instead of ``embedding``; an int8 RNN layer or
decoder cell becomes ``linear_int8`` input projections + ``gru_recurrence_int8`` /
``lstm_recurrence_int8`` (:mod:`seqjit.models.rnn_int8_graphs`). Activations, the recurrent state
included, are quantized per row on every call (dynamic quantization).

16-bit models (``"quantization": "float16"`` or ``"bfloat16"``, :func:`half_weight_names`): each
16-bit weight is a ``uint16`` ``[N, K]`` tensor of that format's bits (:mod:`seqjit.models.half_format`;
stored as ``F16``/``BF16`` in ``model.safetensors``), with nothing beside it. The same weights as int8
but the RNN matrices: the ``linear`` weights, a Transformer's token tables (a tied table is the output
projection's weight too). The GRU/LSTM matrices, layer norms, biases, position tables and RNN
embeddings stay float32 (the recurrence kernels have no 16-bit form). The builders emit
``linear_half`` / ``embedding_half`` (``fmt`` attribute) for them; activations stay float32.

Arithmetic (``"arithmetic"`` in ``config.json``, default ``"float32"``): a bfloat16 model may compute
its products in bf16 (``"bfloat16"``: every ``linear_half`` gets ``arith="bfloat16"``: x rounded to
bf16, AVX512-BF16's vdpbf16ps, float32 accumulation; docs/half_precision.md). Norms, softmax,
attention and the embeddings stay float32.
"""
from __future__ import annotations

import numpy as np

from seqjit.graph.ops import TensorSpec
from seqjit.models.half_format import CODES as HALF_FORMATS

SCHEMES = ("none", "int8", *HALF_FORMATS)
#: the arithmetic of a model's products: float32, or bf16 products for a bfloat16 model
ARITHMETICS = ("float32", "bfloat16")
SCALE = ".scale"

_TRANSFORMER_SUFFIXES = ("_proj.weight", ".fc1.weight", ".fc1_gate.weight", ".fc2.weight")
_TRANSFORMER_TABLES = ("lm_head.weight", "shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
_RNN_LINEARS = ("decoder.out.weight", "bridge.weight", "bridge_c.weight", "decoder.attention.Ua.weight",
                "decoder.concat.weight")
_RNN_MATRICES = ("encoder.rnn.weight_", "decoder.rnn.weight_")  # weight_ih_l{k}[_reverse], weight_hh_...


def int8_weight_names(config, names) -> list:
    """The weights among ``names`` that an int8 model of ``config``'s architecture stores as int8:
    its ``linear`` weights, a Transformer's embedding tables, an RNN model's GRU/LSTM matrices."""
    if config.arch == "transformer":
        return [n for n in names if n.endswith(_TRANSFORMER_SUFFIXES) or n in _TRANSFORMER_TABLES]
    linears = set(_RNN_LINEARS)
    if getattr(config, "attention", None) == "general":  # Bahdanau's Wa is read by additive_attention
        linears.add("decoder.attention.Wa.weight")
    return [n for n in names if n in linears or (n.startswith(_RNN_MATRICES) and not n.endswith(SCALE))]


def half_weight_names(config, names) -> list:
    """The weights among ``names`` that a 16-bit model of ``config``'s architecture stores in 16 bits:
    those of :func:`int8_weight_names` but the GRU/LSTM matrices."""
    return [n for n in int8_weight_names(config, names) if not n.startswith(_RNN_MATRICES)]


def half_format(config) -> str | None:
    """The 16-bit format (``"float16"``, ``"bfloat16"``) of ``config``'s weights, or None."""
    scheme = getattr(config, "quantization", "none")
    return scheme if scheme in HALF_FORMATS else None


def quantized_spec(spec: dict, config) -> dict:
    """``spec`` (name -> TensorSpec of a float model) for ``config``'s quantization: each weight of
    :func:`int8_weight_names` int8, with its float32 scales ``<name>.scale`` (one per row); for a 16-bit
    scheme each weight of :func:`half_weight_names` uint16 (the format's bits), no scales."""
    scheme = getattr(config, "quantization", "none")
    if scheme == "none":
        return spec
    out = dict(spec)
    if scheme in HALF_FORMATS:
        for name in half_weight_names(config, spec):
            out[name] = TensorSpec(tuple(spec[name].shape), np.dtype(np.uint16))
        return out
    for name in int8_weight_names(config, spec):
        shape = tuple(spec[name].shape)
        out[name] = TensorSpec(shape, np.dtype(np.int8))
        out[name + SCALE] = TensorSpec((shape[0],), np.dtype(np.float32))
    return out


def linear(g, x, weights: dict, weight_name: str, bias=None, *, config=None, **attrs):
    """A ``linear`` node on graph builder ``g`` reading weight ``weight_name`` of ``weights`` (added
    as a constant), or ``linear_int8`` with its scales when that weight is int8, or ``linear_half``
    when it is 16-bit (uint16: the format is ``config``'s quantization). ``bias``: a graph value or
    None; ``attrs``: ``activation``, ``name``."""
    w = weights[weight_name]
    wv = g.constant(weight_name, w)
    if w.dtype == np.int8:
        scale = g.constant(weight_name + SCALE, weights[weight_name + SCALE])
        return g.op("linear_int8", x, wv, scale, bias, **attrs)
    if w.dtype == np.uint16:
        return g.op("linear_half", x, wv, bias, fmt=_fmt(config, weight_name),
                    arith=getattr(config, "arithmetic", "float32"), **attrs)
    return g.op("linear", x, wv, bias, **attrs)


def _fmt(config, weight_name: str) -> str:
    fmt = half_format(config)
    if fmt is None:
        raise ValueError(f"weight {weight_name!r} is 16-bit (uint16) but the model's config names no 16-bit "
                         f"format (quantization {getattr(config, 'quantization', None)!r})")
    return fmt


def quantize(model, scheme: str = "int8", *, arithmetic: str = "float32"):
    """A new model of the same architecture with the weights of :func:`int8_weight_names` (linear
    weights, a Transformer's embedding tables, GRU/LSTM matrices) quantized to ``scheme`` ("int8":
    symmetric per row, float32 scales), or those of :func:`half_weight_names` rounded to a 16-bit
    format (``"float16"``, ``"bfloat16"``: to nearest, ties to even; a weight beyond float16's range
    is refused, naming it); ``model`` is left unchanged. ``arithmetic="bfloat16"`` (``scheme``
    "bfloat16" only): the products in bf16 (see the module docstring), saved in the config."""
    from seqjit import kernels

    if scheme not in SCHEMES[1:]:
        raise ValueError(f"scheme must be one of {list(SCHEMES[1:])}, got {scheme!r}")
    if type(arithmetic) is not str or arithmetic not in ARITHMETICS:
        raise ValueError(f"arithmetic must be one of {list(ARITHMETICS)}, got {arithmetic!r}")
    if arithmetic != "float32" and scheme != "bfloat16":
        raise ValueError(f"arithmetic {arithmetic!r} needs scheme 'bfloat16' (bfloat16 weights), got {scheme!r}")
    c = model.config
    if getattr(c, "quantization", None) is None:
        raise ValueError(f"architecture {model.arch!r} has no quantized form")
    if c.quantization != "none":
        raise ValueError(f"the model is already quantized ({c.quantization})")
    if c.dtype != "float32":
        raise ValueError(f"{scheme} quantization needs a float32 model, got dtype {c.dtype}")
    weights = dict(model.weights)
    config = c.replace(quantization=scheme, arithmetic=arithmetic)
    if scheme in HALF_FORMATS:
        narrow = kernels.get("narrow_half")
        for name in half_weight_names(config, type(model).weight_spec(config)):
            weights[name] = narrow(np.ascontiguousarray(weights[name], dtype=np.float32), scheme)
            _check_range(name, weights[name], scheme)
        return _rebuilt(model, config, weights)
    quantize_rows = kernels.get("quantize_int8")
    for name in int8_weight_names(config, type(model).weight_spec(config)):
        q, s = quantize_rows(np.ascontiguousarray(weights[name], dtype=np.float32))
        weights[name], weights[name + SCALE] = q, s
    return _rebuilt(model, config, weights)


def _check_range(name: str, bits: np.ndarray, fmt: str) -> None:
    from seqjit.models.half_format import count_nonfinite

    bad = count_nonfinite(bits, fmt)
    if bad:
        raise ValueError(f"weight {name!r} has {bad} value(s) beyond the range of {fmt} (largest finite: "
                         f"{65504.0 if fmt == 'float16' else 3.39e38:g}); quantize it to bfloat16, or keep float32")


def _rebuilt(model, config, weights: dict):
    new = type(model)(config, weights, backend=model.backend, source="quantized weights")
    if hasattr(model, "replay"):
        new.replay = model.replay
    return new.prepare()


__all__ = ["quantize", "quantized_spec", "int8_weight_names", "half_weight_names", "half_format", "linear",
           "SCHEMES", "SCALE", "HALF_FORMATS",
           "ARITHMETICS"]
