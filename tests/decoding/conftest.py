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


@pytest.fixture(scope="module")
def pairs(make_tiny_marian, tmp_path_factory):
    """name -> (model decoding natively, the same model replayed in Python, source token range)."""
    import seqjit
    from seqjit.g2p import G2P

    path = tmp_path_factory.mktemp("marian")
    make_tiny_marian(seed=4).save_pretrained(path)
    out = {"marian": (seqjit.from_hf(path), seqjit.from_hf(path), 94)}
    for name in ("gru", "attention", "transformer"):
        out[f"g2p-{name}"] = (G2P(name).model, G2P(name).model, None)
    for native, python, _ in out.values():
        native.set_replay("native")
        python.set_replay("python")
    return out
