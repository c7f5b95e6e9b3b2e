"""Model directories: truncated, corrupted, misshapen and inconsistent files give clear errors."""
import json

import numpy as np
import pytest

import seqjit
from seqjit.errors import ConfigError, ModelFormatError
from seqjit.models.transformer import TransformerConfig, TransformerModel

CONFIG = TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, d_model=8, encoder_layers=1, decoder_layers=1,
                           encoder_heads=2, decoder_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, max_positions=16,
                           final_logits_bias=True)


def _weights(config=CONFIG, seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s.shape).astype(s.dtype) for k, s in TransformerModel.weight_spec(config).items()}


@pytest.fixture
def saved(tmp_path):
    TransformerModel(CONFIG, _weights()).save(tmp_path)
    return tmp_path


def test_round_trip(saved):
    model = seqjit.load(saved)
    assert model.config == CONFIG
    for k, w in _weights().items():
        np.testing.assert_array_equal(model.weights[k], w)
    assert json.loads((saved / "config.json").read_text())["architecture"] == "transformer"


def test_truncated_weights_name_the_file(saved):
    path = saved / "model.safetensors"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFormatError, match="model.safetensors is not a readable safetensors file.*truncated"):
        seqjit.load(saved)
    path.write_bytes(b"")
    with pytest.raises(ModelFormatError, match="model.safetensors"):
        seqjit.load(saved)


def test_corrupted_header_and_data_are_detected(saved):
    path = saved / "model.safetensors"
    raw = bytearray(path.read_bytes())
    bad = bytearray(raw)
    bad[12:20] = b"@@@@@@@@"
    path.write_bytes(bytes(bad))
    with pytest.raises(ModelFormatError, match="model.safetensors"):
        seqjit.load(saved)
    bad = bytearray(raw)
    bad[-5] ^= 0xFF  # one flipped byte in the last tensor's data
    path.write_bytes(bytes(bad))
    with pytest.raises(ModelFormatError, match="fails its CRC-32 check"):
        seqjit.load(saved)


def test_misshapen_missing_unexpected_and_wrong_dtype(tmp_path):
    from seqjit.models.io import write_safetensors

    w = _weights()
    w["encoder.layers.0.fc1.weight"] = w["encoder.layers.0.fc1.weight"][:, :4].copy()
    del w["decoder.layers.0.fc2.bias"]
    w["extra.weight"] = np.zeros(3, np.float32)
    w["final_logits_bias"] = w["final_logits_bias"].astype(np.float64)
    write_safetensors(tmp_path / "model.safetensors", w)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG.to_dict()))
    with pytest.raises(ModelFormatError) as info:
        seqjit.load(tmp_path)
    msg = str(info.value)
    assert "model.safetensors" in msg
    assert "missing weight(s): decoder.layers.0.fc2.bias" in msg
    assert "unexpected weight(s): extra.weight" in msg
    assert "encoder.layers.0.fc1.weight has shape [16, 4], expected [16, 8]" in msg
    assert "final_logits_bias has dtype float64, expected float32" in msg


def test_bad_config_files(saved):
    cfg = saved / "config.json"
    good = cfg.read_text()
    cfg.write_text(good[:30])
    with pytest.raises(ModelFormatError, match="config.json is not valid JSON"):
        seqjit.load(saved)
    cfg.write_text(json.dumps({**json.loads(good), "architecture": "lstm9000"}))
    with pytest.raises(ModelFormatError, match="unknown architecture 'lstm9000'"):
        seqjit.load(saved)
    cfg.write_text(json.dumps({**json.loads(good), "d_modle": 8}))
    with pytest.raises(ModelFormatError, match=r"config.json.*unknown key\(s\) \['d_modle'\]"):
        seqjit.load(saved)
    cfg.write_text(json.dumps({**json.loads(good), "activation": "swishy"}))
    with pytest.raises(ModelFormatError, match="'activation' must be one of"):
        seqjit.load(saved)
    cfg.write_text(json.dumps({**json.loads(good), "d_model": "8"}))
    with pytest.raises(ModelFormatError, match="'d_model' must be int"):
        seqjit.load(saved)
    (saved / "config.json").unlink()
    with pytest.raises(ModelFormatError, match="config.json does not exist"):
        seqjit.load(saved)
    with pytest.raises(ModelFormatError, match="is not a model directory"):
        seqjit.load(saved / "nowhere")


def test_config_consistency_checks():
    with pytest.raises(ConfigError, match="d_model 8 must be divisible by encoder_heads 3"):
        CONFIG.replace(encoder_heads=3)
    with pytest.raises(ConfigError, match="share_embeddings needs src_vocab_size == tgt_vocab_size"):
        CONFIG.replace(share_embeddings=True)
    with pytest.raises(ConfigError, match="eos_id 13 is outside the target vocabulary"):
        CONFIG.replace(eos_id=13)


def test_from_torch_errors():
    with pytest.raises(ValueError, match="unknown arch 'gpt'"):
        seqjit.from_torch({}, arch="gpt")
    with pytest.raises(ModelFormatError, match="state_dict has no 'src_embed.weight'"):
        seqjit.from_torch({"transformer.encoder.layers.0.x": np.zeros(1)}, nhead=2)
    with pytest.raises(TypeError, match="must be a numpy.ndarray or a torch.Tensor"):
        seqjit.from_torch({"a": [1.0]}, nhead=2)
