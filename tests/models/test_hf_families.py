"""from_hf on BART, mBART, M2M100 and Pegasus directories written by transformers: encoder output,
step and teacher-forced logits against transformers on the same weights (native and Python replay);
each family rule shown to matter; unsupported options refused by name."""
import json

import numpy as np
import pytest

import torch  # noqa: E402  (test extra)

import seqjit  # noqa: E402
from seqjit.errors import ModelFormatError  # noqa: E402
from seqjit.models.transformer import TransformerModel  # noqa: E402

from .conftest import FAMILIES, tiny_hf

TOL = 1e-4  # relative to the largest |logit|


def _batch(model, batch=3, src_len=9, tgt_len=7, seed=1):
    """Right-padded sources (source 0 holds the pad token inside it, attended: M2M100 gives it no
    position) and targets starting with the decoder start token, without pad (the step path)."""
    pad, vocab = model.pad_id, model.target_vocab_size
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, src_len), generator=g)
    src[0, 3] = pad
    lengths = torch.tensor([src_len, 4, 6][:batch])
    mask = (torch.arange(src_len)[None, :] < lengths[:, None]).long()
    src = torch.where(mask.bool(), src, torch.full_like(src, pad))
    tgt = torch.randint(3, vocab, (batch, tgt_len), generator=g)
    tgt[:, 0] = model.decoder_start_id
    return src, mask, tgt, lengths


def _reference(hf, src, mask, tgt):
    with torch.no_grad():
        enc = hf.get_encoder()(input_ids=src, attention_mask=mask).last_hidden_state.numpy()
        logits = hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits.numpy()
    return enc, logits


def _close(got, want, what):
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= TOL, f"{what}: error {err:.2e} of the largest logit"


@pytest.mark.parametrize("replay", ["native", "python"])
@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers(hf_family, family, replay):
    hf, model, _ = hf_family(family)
    model.set_replay(None if replay == "native" else "python")
    try:
        src, mask, tgt, lengths = _batch(model)
        enc, want = _reference(hf, src, mask, tgt)
        memory = model.encode(src.numpy(), lengths.numpy())["memory"]
        for b, n in enumerate(lengths.numpy()):
            _close(memory[b, :n], enc[b, :n], f"encoder row {b}")
        state = model.start(src.numpy(), lengths.numpy(), max_length=tgt.shape[1])
        for t in range(tgt.shape[1]):
            _close(model.step(state, tgt[:, t].numpy()), want[:, t], f"step {t}")
        _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, "teacher-forced")
    finally:
        model.set_replay(None)


def test_padding_aware_positions_in_the_target(hf_family):
    """M2M100 counts positions over non-pad tokens: a pad inside the target shifts the later ones."""
    hf, model, _ = hf_family("m2m_100")
    src, mask, tgt, lengths = _batch(model)
    tgt[1, 3] = model.pad_id
    _, want = _reference(hf, src, mask, tgt)
    _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, "teacher-forced")


def test_family_rules(hf_family):
    got = {f: hf_family(f)[1].config for f in FAMILIES}
    rules = ("norm_first", "layernorm_embedding", "encoder_final_norm", "positions", "position_layout",
             "position_offset", "padding_positions", "final_logits_bias", "scale_embedding", "activation")
    assert {f: tuple(getattr(c, r) for r in rules) for f, c in got.items()} == {
        "bart": (False, True, False, "learned", "interleaved", 2, False, True, False, "gelu"),
        "mbart": (True, True, True, "learned", "interleaved", 2, False, True, False, "gelu"),
        "m2m_100": (True, False, True, "sinusoidal", "fairseq", 2, True, False, True, "relu"),
        "pegasus": (True, False, True, "sinusoidal", "halves", 0, False, True, False, "gelu"),
    }
    assert (got["bart"].decoder_start_id, got["bart"].forced_eos_id, got["bart"].forced_bos_id) == (2, 2, None)
    assert got["mbart"].decoder_start_id == 0  # no decoder_start_token_id: transformers starts from BOS
    assert (got["pegasus"].pad_id, got["pegasus"].eos_id, got["pegasus"].decoder_start_id) == (0, 1, 0)


BROKEN = [  # (family, config change, weights the changed config no longer has)
    ("bart", "position_offset", ()),
    ("bart", "layernorm_embedding", ("layernorm_embedding",)),
    ("bart", "norm_first", ()),
    ("mbart", "norm_first", ()),
    ("mbart", "decoder_final_norm", ("decoder.layer_norm",)),
    ("m2m_100", "position_offset", ()),
    ("m2m_100", "padding_positions", ()),
    ("m2m_100", "position_layout", ()),
    ("pegasus", "position_layout", ()),
    ("pegasus", "scale_embedding", ()),
]


@pytest.mark.parametrize("family,rule,dropped", BROKEN)
def test_a_broken_family_rule_fails_the_comparison(hf_family, family, rule, dropped):
    """The comparison above detects each rule: the model with that one rule changed is far off."""
    hf, model, _ = hf_family(family)
    c = model.config
    if rule == "position_offset":  # one row off, the table as large
        change = dict(position_offset=c.position_offset - 1, max_positions=c.max_positions + 1)
    elif rule == "position_layout":
        change = dict(position_layout="interleaved" if family == "pegasus" else "halves")
    else:
        change = {rule: not getattr(c, rule)}
    weights = {k: v for k, v in model.weights.items() if not any(d in k for d in dropped)}
    broken = TransformerModel(c.replace(**change), weights)
    src, mask, tgt, lengths = _batch(model)
    _, want = _reference(hf, src, mask, tgt)
    got = broken.logits(src.numpy(), tgt.numpy(), lengths.numpy())
    assert np.abs(got - want).max() / np.abs(want).max() > 100 * TOL


def test_untied_output_projection(tmp_path):
    hf = tiny_hf("bart", tmp_path, seed=3, tie_word_embeddings=False, scale_embedding=True)
    model = seqjit.from_hf(tmp_path)
    assert not model.config.tie_output and model.config.scale_embedding
    assert "lm_head.weight" in model.weights
    src, mask, tgt, lengths = _batch(model)
    _, want = _reference(hf, src, mask, tgt)
    _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, "teacher-forced")


def _edit(path, name, **changes):
    data = json.loads((path / name).read_text())
    data.update(changes)
    (path / name).write_text(json.dumps(data))


@pytest.mark.parametrize("name,changes,match", [
    ("generation_config.json", {"forced_decoder_ids": [[1, 5]]}, "generation_config.json: 'forced_decoder_ids' is not "
                                                                 "supported"),
    ("generation_config.json", {"bad_words_ids": [5, 6]}, "'bad_words_ids' must be a list of token-id lists"),
    ("generation_config.json", {"suppress_tokens": ["a"]}, "'suppress_tokens' must be a list of token ids"),
    ("generation_config.json", {"suppress_tokens": [500]}, r"suppress_tokens must be a list of token ids in \[0, 96\)"),
    ("generation_config.json", {"eos_token_id": [2, -5]}, "'eos_token_id' must be a list of token ids"),
    ("config.json", {"is_decoder": True}, "config.json: 'is_decoder' true"),
    ("config.json", {"activation_function": "quick_gelu"}, "activation_function 'quick_gelu' is not supported"),
    ("config.json", {"model_type": "led"}, "model_type 'led' is not supported"),
    ("config.json", {"encoder_layers": 1}, "unexpected weight.*encoder.layers.1"),
])
def test_unsupported_options_are_named(tmp_path, name, changes, match):
    tiny_hf("bart", tmp_path)
    _edit(tmp_path, name, **changes)
    with pytest.raises(ModelFormatError, match=match):
        seqjit.from_hf(tmp_path)


def test_pegasus_without_final_logits_bias(tmp_path):
    """transformers zero-fills a missing Pegasus final_logits_bias; seqjit loads it without one."""
    from safetensors.numpy import load_file, save_file

    hf = tiny_hf("pegasus", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["final_logits_bias"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    model = seqjit.from_hf(tmp_path)
    assert not model.config.final_logits_bias
    with torch.no_grad():
        hf.final_logits_bias.zero_()
    src, mask, tgt, lengths = _batch(model)
    _, want = _reference(hf, src, mask, tgt)
    _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, "teacher-forced")


@pytest.mark.parametrize("family", FAMILIES)
def test_convert_and_inspect(hf_family, tmp_path, family):
    """``seqjit convert`` writes a seqjit directory that loads to the same model; ``inspect`` shows it."""
    from seqjit.commands.convert import convert
    from seqjit.commands.inspect import describe

    hf, model, path = hf_family(family)
    _, kind, _ = convert(path, tmp_path / "out")
    assert kind == f"Hugging Face {family}"
    again = seqjit.load(tmp_path / "out")
    assert again.config == model.config
    info = describe(again)
    assert info["config"]["forced_eos_id"] == model.config.forced_eos_id
    src, mask, tgt, lengths = _batch(again)
    _, want = _reference(hf, src, mask, tgt)
    _close(again.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, "teacher-forced")


BASE = {  # the real models' dimensions (random weights, transformers' default init)
    "bart": dict(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                 decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024),
    "m2m_100": dict(vocab_size=128112, d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                    decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024),
}


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(BASE))
def test_base_sized_models(tmp_path, family):
    """bart-base and m2m100_418M dimensions: logits and greedy ids against transformers."""
    from .conftest import _classes

    config_class, model_class = _classes(family)
    torch.manual_seed(0)
    hf = model_class(config_class(**BASE[family])).eval()
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = seqjit.from_hf(tmp_path)
    src, mask, tgt, lengths = _batch(model, src_len=12, tgt_len=6)
    _, want = _reference(hf, src, mask, tgt)
    _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, "teacher-forced")
    sources = [s[:n].tolist() for s, n in zip(src, lengths)]
    from .test_hf_families_generate import hf_generate

    ref = hf_generate(hf, model, sources, num_beams=1)
    assert [r.ids[0] for r in model.generate(sources, max_length=10)] == [ids for ids, _ in ref]
