"""Decoding shared by every architecture: greedy, beam search, sampling, streaming.

``decode`` is ``generate`` taking its options as one mapping: what ``model.generate`` calls (the
models sit below this package and reach it by this one name)."""
from .api import DecodingOptions, GenerationResult, StepToken, decode, generate, generate_stream, pad_sources

__all__ = ["generate", "generate_stream", "DecodingOptions", "GenerationResult", "StepToken", "pad_sources", "decode"]
