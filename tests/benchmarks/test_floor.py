"""benchmarks/harness/floor.py counts the weights a batch-1 decoder step reads: checked against the
parameters of a transformers Marian model, named one by one (an independent count), and its line."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the test extra's torch builds the reference model")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = dict(d_model=48, decoder_ffn_dim=72, encoder_ffn_dim=64, decoder_layers=3, encoder_layers=2,
              decoder_attention_heads=4, encoder_attention_heads=4, vocab_size=211, pad_token_id=210,
              decoder_start_token_id=210, max_position_embeddings=64)


def _floor():
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # last: the checkout's kernels/ must not shadow an installed `kernels`
    from benchmarks.harness import floor

    return floor


def _read_per_step(model) -> tuple[int, int]:
    """Weights (and output rows) a step reads: each decoder layer's self-attention, the cross-attention's
    query and output projections (its keys and values come from the encoder, once), the feed-forward
    pair, and the output projection with its bias; not the embeddings (one row a step) or the norms."""
    weights = rows = 0
    for name, p in model.named_parameters():
        if not name.startswith("model.decoder.layers.") or "layer_norm" in name:
            continue
        if ".encoder_attn.k_proj." in name or ".encoder_attn.v_proj." in name:
            continue
        weights += p.numel()
        rows += p.shape[0] if name.endswith(".weight") else 0
    vocab, d = model.lm_head.weight.shape
    return weights + vocab * d + model.final_logits_bias.numel(), rows + vocab


def test_step_matrices_count_what_a_decoder_step_reads():
    model = transformers.MarianMTModel(transformers.MarianConfig(**CONFIG))
    assert _floor().step_matrices(model.config.to_dict()) == _read_per_step(model)


def test_step_bytes_by_storage():
    floor = _floor()
    weights, rows = floor.step_matrices(CONFIG)
    assert floor.step_bytes(CONFIG, "seqjit") == 4 * weights
    assert floor.step_bytes(CONFIG, "seqjit@old") == 4 * weights
    assert floor.step_bytes(CONFIG, "seqjit-float16") == 2 * weights
    assert floor.step_bytes(CONFIG, "ctranslate2-int8") == weights + 4 * rows
    assert floor.step_bytes(CONFIG, "numpy") is None


def test_the_line_sets_each_rate_beside_the_bandwidth(monkeypatch):
    floor = _floor()
    monkeypatch.setattr(floor, "llc_bytes", lambda: 1 << 40)  # everything fits: flagged as not a memory rate
    roof = {"read_1t": 20.0, "read_2t": 30.0}
    nbytes = floor.step_bytes(CONFIG, "seqjit")
    best = {("seqjit", 1): {"rate": 1e9 / nbytes, "threads": 2}, ("seqjit", 16): {"rate": 1.0, "threads": 1}}
    (blank, line), = [floor.lines(CONFIG, best, roof)]
    assert blank == "" and "= 1.0 GB/s, 3% of the host's 30.0 GB/s at 2 thread(s) (5% of one core's)" in line
    assert "not a memory rate" in line and line.count("tok/s") == 1
    assert floor.lines(CONFIG, {("seqjit", 16): best[("seqjit", 16)]}, roof) == []
