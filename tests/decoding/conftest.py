"""A tiny random-weight MarianMT model, saved the Hugging Face way and imported into seqjit."""
import numpy as np
import pytest
import torch

VOCAB, PAD, EOS = 96, 95, 0


def tiny_marian(seed: int = 0, **overrides):
    """A seeded ``transformers.MarianMTModel`` with weights large enough that the best next tokens
    are far apart (with the default init_std the logits are nearly tied and argmax becomes a coin
    toss on rounding)."""
    from transformers import MarianConfig, MarianMTModel

    cfg = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
               pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, forced_eos_token_id=None,
               activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True)
    cfg.update(overrides)
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**cfg)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p)) if name.endswith("weight") else p.normal_(0, 0.1)
            elif "embed_positions" not in name:
                p.normal_(0, 0.25)
    return model


@pytest.fixture(scope="session")
def marian_pair(tmp_path_factory):
    """(transformers model, seqjit model) with the same weights."""
    import seqjit

    hf = tiny_marian()
    path = tmp_path_factory.mktemp("marian")
    hf.save_pretrained(path, safe_serialization=True)
    return hf, seqjit.convert.from_hf(path)


def _random_sources(n: int, seed: int = 1, low: int = 1, high: int = 14):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, PAD, size=int(rng.integers(low, high))).tolist() for _ in range(n)]


@pytest.fixture
def random_sources():
    """``random_sources(n, seed)`` -> n token-id lists of lengths 1..13 (no pad, no end token)."""
    return _random_sources
