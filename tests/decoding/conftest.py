"""A tiny random-weight MarianMT model, saved the Hugging Face way and imported into seqjit."""
import numpy as np
import pytest

VOCAB, PAD, EOS = 96, 95, 0


@pytest.fixture(scope="session")
def marian_pair(tmp_path_factory, make_tiny_marian):
    """(transformers model, seqjit model) with the same weights."""
    import seqjit

    hf = make_tiny_marian()
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
