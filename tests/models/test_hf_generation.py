"""Every tensor and decoding key of a Hugging Face directory used or refused, as ``transformers`` reads
them: stored sinusoid tables (Marian, Pegasus) against ``transformers``' logits; Marian's
``generation_config.json`` (suppression, forced end token) against ``transformers.generate`` on the
model ``from_pretrained`` reloads from the same files; keys seqjit cannot apply refused by name."""
import collections
import json
import warnings

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file, save_file

import seqjit
from seqjit.convert.hf_generation import GenerationDefaultsWarning
from seqjit.errors import ModelFormatError

from .conftest import tiny_hf
from .test_hf_families_generate import MAX_NEW, _check, _sources, hf_generate

TOL = 1e-4  # relative to the largest |logit|
MARIAN = dict(vocab_size=60, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=40,
              pad_token_id=59, decoder_start_token_id=59, eos_token_id=0, forced_eos_token_id=0, scale_embedding=True)


def _marian(path, seed=0):
    """A seeded MarianMT saved to ``path``, weights wide enough that the best tokens are far apart."""
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(transformers.MarianConfig(**MARIAN)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if "layer_norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p)) if name.endswith("weight") else p.normal_(0, 0.1)
            else:
                p.normal_(0, 0.25)
        model.final_logits_bias.normal_(0, 0.5)
    model.save_pretrained(path, safe_serialization=True)
    return model


def _reload(path, cls):
    """transformers' own reading of the files in ``path`` (weights and generation config)."""
    return cls.from_pretrained(path).eval()


def _edit_generation(path, **changes):
    gen = json.loads((path / "generation_config.json").read_text())
    gen.update(changes)
    (path / "generation_config.json").write_text(json.dumps(gen))


def _logits_error(hf, model, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, model.target_vocab_size - 1, (2, 30), generator=g)
    tgt = torch.randint(3, model.target_vocab_size - 1, (2, 25), generator=g)
    tgt[:, 0] = model.decoder_start_id
    lengths = np.array([30, 30])
    with torch.no_grad():
        want = hf(input_ids=src, decoder_input_ids=tgt).logits.numpy()
    got = model.logits(src.numpy(), tgt.numpy(), lengths)
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("family", ["pegasus", "marian"])
def test_stored_position_table_is_used(tmp_path, family):
    """A stored ``embed_positions.weight`` that is not the sinusoid: transformers uses it, so does seqjit
    (30 source and 25 target positions, so the rows matter)."""
    if family == "pegasus":
        tiny_hf("pegasus", tmp_path, seed=4)
        cls = transformers.PegasusForConditionalGeneration
    else:
        _marian(tmp_path, seed=4)
        cls = transformers.MarianMTModel
    tensors = load_file(tmp_path / "model.safetensors")
    rng = np.random.default_rng(0)
    rows = 64 if family == "pegasus" else MARIAN["max_position_embeddings"]
    for side in ("encoder", "decoder"):
        tensors[f"model.{side}.embed_positions.weight"] = rng.normal(0, 1, (rows, 32)).astype(np.float32)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    hf = _reload(tmp_path, cls)
    model = seqjit.from_hf(tmp_path)
    assert model.config.positions == "learned"
    assert _logits_error(hf, model) <= TOL


def test_stored_sinusoid_is_computed(tmp_path):
    """Pegasus' saved table is transformers' sinusoid: seqjit computes it (no table kept)."""
    hf = tiny_hf("pegasus", tmp_path, seed=4)
    model = seqjit.from_hf(tmp_path)
    assert model.config.positions == "sinusoidal" and "encoder.embed_positions.weight" not in model.weights
    assert _logits_error(hf, model) <= TOL


def test_m2m100_stray_position_table_refused(tmp_path):
    """M2M100's sinusoid is a buffer transformers never loads: a file's table is an unknown tensor."""
    tiny_hf("m2m_100", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["model.encoder.embed_positions.weight"] = np.zeros((66, 32), np.float32)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelFormatError, match="unexpected weight.*model.encoder.embed_positions.weight"):
        seqjit.from_hf(tmp_path)


def test_position_table_tolerance():
    """A table within one ulp of 1.0 in its dtype of transformers' sinusoid is computed; beyond, used."""
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    from seqjit.convert.hf_transformer import stored_positions
    from seqjit.models.transformer import TransformerConfig

    cfg = TransformerConfig.from_dict(dict(src_vocab_size=10, tgt_vocab_size=10, d_model=8, encoder_layers=1,
                                           decoder_layers=1, encoder_heads=2, decoder_heads=2, encoder_ffn_dim=8,
                                           decoder_ffn_dim=8, position_layout="halves", max_positions=16))
    exact = MarianSinusoidalPositionalEmbedding(16, 8).create_weight().numpy()  # float32
    name = "model.encoder.embed_positions.weight"
    assert stored_positions({name: exact.astype(np.float16)}, cfg, "f") == {}
    assert stored_positions({name: exact.astype(np.float32)}, cfg, "f") == {}
    off = exact.astype(np.float32)
    off[5, 3] += 3e-7  # 2.5 ulp of 1.0 in float32
    used = stored_positions({name: off}, cfg, "f")
    assert used["encoder.embed_positions.weight"] is off
    np.testing.assert_array_equal(used["decoder.embed_positions.weight"], exact)  # transformers fills it so
    with pytest.raises(ModelFormatError, match=r"f: model.encoder.embed_positions.weight has shape \(15, 8\)"):
        stored_positions({name: off[:15]}, cfg, "f")


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    path = tmp_path_factory.mktemp("marian_gen")
    return _marian(path, seed=2), path


def _copy(src, dst):
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def test_marian_forced_end_token(marian):
    """Marian's generation config forces its end token at max_length, as transformers does."""
    hf, path = marian
    model = seqjit.from_hf(path)
    assert model.config.forced_eos_id == 0
    sources = _sources(20, MARIAN["vocab_size"] - 1, seed=3)
    ref = hf_generate(hf, model, sources, num_beams=1)
    assert any(len(ids) == MAX_NEW - 1 for ids, _ in ref)  # some end by the rule
    _check(model, sources, ref)


def test_marian_suppress_tokens_from_generation_config(marian, tmp_path):
    hf, path = marian
    model = seqjit.from_hf(path)
    sources = _sources(20, MARIAN["vocab_size"] - 1, seed=4)
    plain = hf_generate(hf, model, sources, num_beams=1)
    common = [t for t, _ in collections.Counter(t for ids, _ in plain for t in ids).most_common(3)]
    _edit_generation(_copy(path, tmp_path), suppress_tokens=common)
    hf_file = _reload(tmp_path, transformers.MarianMTModel)
    converted = seqjit.from_hf(tmp_path)
    ref = hf_generate(hf_file, converted, sources, num_beams=1)
    assert ref != plain and not any(set(ids) & set(common) for ids, _ in ref)
    _check(converted, sources, ref)


def test_generation_config_overrides_config_json(tmp_path):
    """With a generation_config.json transformers reads it alone: config.json's forced_eos_token_id
    then forces nothing."""
    hf = tiny_hf("bart", tmp_path, seed=5)
    gen = json.loads((tmp_path / "generation_config.json").read_text())
    del gen["forced_eos_token_id"]
    (tmp_path / "generation_config.json").write_text(json.dumps(gen))
    assert json.loads((tmp_path / "config.json").read_text())["forced_eos_token_id"] == 2
    hf = _reload(tmp_path, transformers.BartForConditionalGeneration)
    model = seqjit.from_hf(tmp_path)
    assert model.config.forced_eos_id is None
    sources = _sources(20, model.target_vocab_size, seed=6)
    ref = hf_generate(hf, model, sources, num_beams=1)
    assert any(len(ids) == MAX_NEW for ids, _ in ref)  # cut by max_length, not by a forced end token
    _check(model, sources, ref)


@pytest.mark.parametrize("changes,match", [
    ({"forced_decoder_ids": [[1, 5]]}, "generation_config.json: 'forced_decoder_ids' is not supported"),
    ({"sequence_bias": [[[5], 2.0]]}, "generation_config.json: 'sequence_bias' is not supported"),
    ({"eos_token_id": [0, "a"]}, r"generation_config.json: 'eos_token_id' must be a list of token ids"),
    ({"forced_eos_token_id": [0, 5]}, "generation_config.json: 'forced_eos_token_id' lists several tokens"),
    ({"my_rule": 1}, "generation_config.json: unknown key.*'my_rule'"),
    ({"eos_token_id": None}, "generation_config.json: missing 'eos_token_id'"),
])
def test_marian_generation_keys_refused_by_name(marian, tmp_path, changes, match):
    _, path = marian
    _edit_generation(_copy(path, tmp_path), **changes)
    with pytest.raises(ModelFormatError, match=match):
        seqjit.from_hf(tmp_path)


def test_equal_end_tokens_accepted(marian, tmp_path):
    _, path = marian
    _edit_generation(_copy(path, tmp_path), eos_token_id=[0, 0])
    assert seqjit.from_hf(tmp_path).eos_id == 0


def test_search_settings_reported(marian, tmp_path):
    """transformers' generate defaults of the file (num_beams, max_length) are named with the seqjit
    option to pass; transformers' own defaults are not reported."""
    _, path = marian
    _edit_generation(_copy(path, tmp_path), num_beams=4, max_length=512, top_k=50, renormalize_logits=True)
    with pytest.warns(GenerationDefaultsWarning, match=r"max_length=512 \(seqjit: max_length=511, .*\); num_beams=4 "
                                                       r"\(seqjit: beam_size=4\); renormalize_logits=True") as record:
        seqjit.from_hf(tmp_path)
    assert "top_k" not in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GenerationDefaultsWarning)
        seqjit.from_hf(path)
