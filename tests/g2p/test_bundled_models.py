"""The bundled G2P models: seqjit against the same weights run as the PyTorch modules they were
trained as (rebuilt from the shipped safetensors), and their error rates."""
import numpy as np
import pytest
import torch

from seqjit.g2p import BUNDLED, G2P
from seqjit.g2p.data import load_split
from torch_models import greedy, torch_module  # benchmarks/g2p/training (tests/g2p/conftest.py)

WORDS = 120


def _batch(vocab, words):
    ids = [vocab.encode_word(w)[0] for w in words]
    src = torch.zeros((len(ids), max(map(len, ids))), dtype=torch.long)
    for i, row in enumerate(ids):
        src[i, : len(row)] = torch.tensor(row)
    return src, torch.tensor([len(r) for r in ids])


@pytest.fixture(scope="module")
def test_words():
    pairs = load_split("test")
    step = len(pairs) // WORDS
    return [pairs[i * step][0] for i in range(WORDS)] + ["supercalifragilisticexpialidocious", "a"]


@pytest.mark.parametrize("name", BUNDLED)
def test_seqjit_matches_pytorch_greedy(name, test_words):
    module, vocab = torch_module(name)
    g2p = G2P(name)
    src, lengths = _batch(vocab, test_words)
    expected = [vocab.decode(ids) for ids in greedy(module, src, lengths, 2 * int(lengths.max()) + 4)]
    got = [p.phonemes for p in g2p.predict(test_words)]
    assert got == expected
    # one by one gives what the batch gave
    assert [g2p.predict([w])[0].phonemes for w in test_words[:10]] == got[:10]


@pytest.mark.parametrize("name", BUNDLED)
def test_seqjit_logits_match_pytorch(name, test_words):
    module, vocab = torch_module(name)
    g2p = G2P(name)
    words = test_words[:16]
    src, lengths = _batch(vocab, words)
    targets = [[1] + vocab.phoneme_ids(p) for p in (x.phonemes for x in g2p.predict(words))]
    tgt = torch.zeros((len(words), max(map(len, targets))), dtype=torch.long)
    for i, row in enumerate(targets):
        tgt[i, : len(row)] = torch.tensor(row)
    with torch.inference_mode():
        expected = module(src, lengths, tgt).numpy()
    got = g2p.model.logits(src.numpy(), tgt.numpy(), lengths.numpy())
    for i, row in enumerate(targets):  # positions past a row's own target are padding on both sides
        np.testing.assert_allclose(got[i, : len(row)], expected[i, : len(row)], atol=2e-4, rtol=1e-4)


def test_bahdanau_attention_weights_match_pytorch(test_words):
    module, vocab = torch_module("attention")
    words = test_words[:8]
    preds = G2P("attention").predict(words, return_attention=True)
    src, lengths = _batch(vocab, words)
    with torch.inference_mode():
        state = module.start(src, lengths)
        prev = torch.full((len(words),), 1, dtype=torch.long)
        for t in range(max(len(p.phonemes) for p in preds)):
            module.step(state, prev)
            for b, p in enumerate(preds):
                if t < len(p.phonemes):
                    np.testing.assert_allclose(p.attention[t], state["weights"][b, : len(words[b])].numpy(), atol=1e-5)
            prev = torch.tensor([vocab.phoneme_ids(p.phonemes[t:t + 1])[0] if t < len(p.phonemes) else 2 for p in preds])
    for p, w in zip(preds, words):
        assert p.attention.shape == (len(p.phonemes), len(w))
        np.testing.assert_allclose(p.attention.sum(axis=1), 1.0, atol=1e-5)


def test_transformer_attention_rows_are_distributions():
    p = G2P("transformer").predict(["hello"], return_attention=True)[0]
    assert p.attention.shape == (len(p.phonemes), 5)
    np.testing.assert_allclose(p.attention.sum(axis=1), 1.0, atol=1e-5)
    assert G2P("gru").predict(["hello"], return_attention=True)[0].attention is None


@pytest.mark.parametrize("name", BUNDLED)
def test_models_are_trained(name):
    """The first 400 test words: a trained model gets most right (an untrained one gets none)."""
    from seqjit.g2p.evaluate import evaluate

    result = evaluate(G2P(name), "test", limit=400)
    assert result.overall.wer < 0.6 and result.overall.per < 0.2


@pytest.mark.slow
@pytest.mark.parametrize("name", BUNDLED)
def test_recorded_test_error_rates_reproduce(name):
    """The figures of docs/g2p.md (stored in g2p.json by the evaluation) come back exactly."""
    from seqjit.g2p.evaluate import evaluate

    g2p = G2P(name)
    recorded = g2p.vocab.info["evaluation"]
    result = evaluate(g2p, "test")
    assert (result.overall.words, result.overall.wrong_words, result.overall.edits) == (
        recorded["words"], recorded["wrong_words"], recorded["edits"])


def test_bad_input_is_refused_with_the_argument_named(tmp_path):
    g2p = G2P("gru")
    with pytest.raises(TypeError, match="list of strings"):
        g2p.predict("hello")
    with pytest.raises(ValueError, match=r"words\[1\]"):
        g2p.predict(["hello", "  "])
    with pytest.raises(ValueError, match="neither a bundled"):
        G2P(str(tmp_path / "missing"))
    p = g2p.predict(["h€llo"])[0]  # € has no accent-free form (é would be read as e)
    assert p.unknown == ["€"] and p.phonemes
