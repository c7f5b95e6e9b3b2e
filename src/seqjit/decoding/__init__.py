"""Decoding shared by every architecture: greedy, beam search, sampling, streaming."""
from .api import DecodingOptions, GenerationResult, StepToken, generate, generate_stream, pad_sources

__all__ = ["generate", "generate_stream", "DecodingOptions", "GenerationResult", "StepToken", "pad_sources"]
