"""``target_prefix`` (issue 37) on the native paths against the Python loop: a random tiny Marian
(transformers config, seeded weights, no download), sources of 8 tokens, a 4-token prefix each,
max_length 24, one thread; greedy and beam 4 at batch 1 and 16. The Python loop is had by making the
native declarations decline (what a path without prefix forcing would do).

    python benchmarks/decoding/target_prefix.py

Prints the median ms per ``generate`` call of each and their ratio.
"""
from __future__ import annotations

import tempfile
import time

import numpy as np


def tiny_marian(path: str):
    import torch
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(3)
    config = MarianConfig(vocab_size=96, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                          max_position_embeddings=128, pad_token_id=95, eos_token_id=0, decoder_start_token_id=95,
                          forced_eos_token_id=None, activation_function="swish", scale_embedding=True)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" not in name:
                p.normal_(0, 0.25)
    model.save_pretrained(path, safe_serialization=True)


def timed(model, sources, prefixes, beam: int, calls: int) -> float:
    for _ in range(3):
        model.generate(sources, target_prefix=prefixes, beam_size=beam, max_length=24)
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            model.generate(sources, target_prefix=prefixes, beam_size=beam, max_length=24)
        runs.append((time.perf_counter() - start) / calls * 1e3)
    return float(np.median(runs))


def main() -> None:
    import seqjit
    from seqjit.decoding import native_beam, native_greedy

    seqjit.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        tiny_marian(tmp)
        model = seqjit.from_hf(tmp)
    rng = np.random.default_rng(0)
    for rows, beam, calls in ((1, 1, 50), (16, 1, 10), (1, 4, 20), (16, 4, 4)):
        sources = [rng.integers(3, 90, 8).tolist() + [0] for _ in range(rows)]
        prefixes = [[20, 21, 22, 23]] * rows
        native = timed(model, sources, prefixes, beam, calls)
        saved = native_greedy.supports, native_beam.supports
        native_greedy.supports = native_beam.supports = lambda request: "declined for the benchmark"
        try:
            python = timed(model, sources, prefixes, beam, calls)
        finally:
            native_greedy.supports, native_beam.supports = saved
        print(f"batch {rows:2d} beam {beam}: native {native:.2f} ms/call, Python loop {python:.2f} ms/call, "
              f"{python / native:.1f}x")


if __name__ == "__main__":
    main()
