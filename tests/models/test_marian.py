"""from_hf on a MarianMT directory written by transformers (seeded random weights, no download)."""
import json

import numpy as np
import pytest

import torch  # noqa: E402  (test extra)
import transformers  # noqa: E402  (test extra)

import seqjit  # noqa: E402
from seqjit.errors import ModelFormatError  # noqa: E402

TOL = 1e-4
TINY = dict(vocab_size=53, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=40,
            pad_token_id=52, decoder_start_token_id=52, eos_token_id=0, scale_embedding=True)


def _marian(tmp_path, seed=0, **overrides):
    torch.manual_seed(seed)
    config = transformers.MarianConfig(**{**TINY, **overrides})
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.2)
        model.final_logits_bias.normal_(0, 0.5)
    model.save_pretrained(tmp_path, safe_serialization=True)
    return model


def _batch(vocab, pad, batch=3, src_len=9, tgt_len=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, vocab - 1, (batch, src_len), generator=g)
    lengths = torch.tensor([src_len, 4, 6][:batch])
    mask = (torch.arange(src_len)[None, :] < lengths[:, None]).long()
    src = torch.where(mask.bool(), src, torch.full_like(src, pad))
    tgt = torch.randint(1, vocab - 1, (batch, tgt_len), generator=g)
    tgt[:, 0] = pad  # decoder_start_token_id
    return src, mask, tgt, lengths


def _check_against_hf(hf, model, src, mask, tgt, lengths):
    with torch.no_grad():
        enc = hf.get_encoder()(input_ids=src, attention_mask=mask).last_hidden_state.numpy()
        want = hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits.numpy()
    memory = model.encode(src.numpy(), lengths.numpy())["memory"]
    for b, n in enumerate(lengths.numpy()):
        np.testing.assert_allclose(memory[b, :n], enc[b, :n], atol=TOL, rtol=0)
    state = model.start(src.numpy(), lengths.numpy(), max_length=tgt.shape[1])
    for t in range(tgt.shape[1]):
        np.testing.assert_allclose(model.step(state, tgt[:, t].numpy()), want[:, t], atol=TOL, rtol=0,
                                   err_msg=f"step {t}")
    np.testing.assert_allclose(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, atol=TOL, rtol=0)


@pytest.mark.parametrize("activation", ["swish", "gelu", "relu"])
def test_marian_encoder_and_step_logits_match(tmp_path, activation):
    hf = _marian(tmp_path, activation_function=activation)
    model = seqjit.from_hf(tmp_path)
    c = model.config
    assert (c.position_layout, c.share_embeddings, c.tie_output, c.norm_first) == ("halves", True, True, False)
    assert (c.pad_id, c.decoder_start_id, c.eos_id) == (52, 52, 0)
    _check_against_hf(hf, model, *_batch(TINY["vocab_size"], 52))


def test_marian_untied_unshared(tmp_path):
    hf = _marian(tmp_path, seed=3, share_encoder_decoder_embeddings=False, tie_word_embeddings=False,
                 decoder_vocab_size=60, scale_embedding=False)
    model = seqjit.from_hf(tmp_path)
    assert not model.config.share_embeddings and not model.config.tie_output
    assert model.config.tgt_vocab_size == 60
    _check_against_hf(hf, model, *_batch(TINY["vocab_size"], 52))


def test_save_load_round_trip_is_identical(tmp_path):
    _marian(tmp_path / "hf")
    model = seqjit.from_hf(tmp_path / "hf")
    model.save(tmp_path / "sj")
    again = seqjit.load(tmp_path / "sj")
    assert again.config == model.config
    assert set(again.weights) == set(model.weights)
    for name, w in model.weights.items():
        np.testing.assert_array_equal(again.weights[name], w)
    src = np.array([[5, 6, 7, 8], [9, 10, 52, 52]])
    tgt = np.array([[52, 3, 4], [52, 5, 6]])
    np.testing.assert_array_equal(again.logits(src, tgt, [4, 2]), model.logits(src, tgt, [4, 2]))


def test_pickle_checkpoint_is_refused(tmp_path):
    _marian(tmp_path)
    (tmp_path / "model.safetensors").rename(tmp_path / "pytorch_model.bin")
    with pytest.raises(ModelFormatError, match="pytorch_model.bin is a PyTorch pickle.*save_file"):
        seqjit.from_hf(tmp_path)
    with pytest.raises(ModelFormatError, match="is a PyTorch pickle"):
        seqjit.load(tmp_path)


def test_unsupported_model_type_and_unknown_weights(tmp_path):
    _marian(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "model_type": "led"}))
    with pytest.raises(ModelFormatError, match="model_type 'led' is not supported"):
        seqjit.from_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "encoder_layers": 1}))
    with pytest.raises(ModelFormatError, match="unexpected weight.*encoder.layers.1"):
        seqjit.from_hf(tmp_path)


@pytest.mark.slow
def test_opus_mt_en_de_sized_model(tmp_path):
    """Random weights at Helsinki-NLP/opus-mt-en-de sizes (no download)."""
    sizes = dict(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                 decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512,
                 pad_token_id=58100, decoder_start_token_id=58100, eos_token_id=0, scale_embedding=True,
                 activation_function="swish")
    hf = _marian(tmp_path, **sizes)
    model = seqjit.from_hf(tmp_path)
    src, mask, tgt, lengths = _batch(58101, 58100, batch=2, src_len=12, tgt_len=5)
    _check_against_hf(hf, model, src, mask, tgt, lengths)
