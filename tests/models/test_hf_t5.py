"""from_hf on T5 directories written by transformers (relu T5 with the tied, rescaled output; gated-GELU
T5 v1.1 / Flan-T5 style without the rescale, and with an lm_head of its own): the bucketing against
transformers' own function, logits and greedy / beam-4 ids against transformers, native and Python
replay; each T5 rule shown to matter."""
import json

import numpy as np
import pytest
import torch
import transformers

import seqjit
from seqjit.errors import ModelFormatError
from seqjit.graph.ops.t5_ops import relative_buckets
from seqjit.models.transformer import TransformerModel

from .test_hf_families import _close
from .test_hf_families_generate import _sources, hf_generate

SIZES = dict(vocab_size=96, d_model=32, d_kv=12, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
             relative_attention_num_buckets=16, relative_attention_max_distance=20)
KINDS = {"relu": {}, "gated_gelu": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)}


def tiny_t5(path, seed=0, untied_head=False, **overrides):
    """A seeded T5 saved to ``path``; ``untied_head``: an lm_head of its own written to the file
    (as T5 v1.1 / Flan-T5 checkpoints hold; transformers 5 builds T5 with it tied)."""
    torch.manual_seed(seed)
    model = transformers.T5ForConditionalGeneration(transformers.T5Config(**{**SIZES, **overrides})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p)) if "layer_norm" in name else p.normal_(0, 0.25)
        if untied_head:
            model.lm_head.weight = torch.nn.Parameter(torch.randn_like(model.shared.weight) * 0.25)
    model.save_pretrained(path, safe_serialization=True)
    if untied_head:
        from safetensors.torch import save_file

        state = {k: v.clone().contiguous() for k, v in model.state_dict().items() if not k.endswith("embed_tokens.weight")}
        save_file(state, path / "model.safetensors", metadata={"format": "pt"})
    return model


@pytest.fixture(scope="module")
def t5_pair(tmp_path_factory):
    cache = {}

    def get(kind):
        if kind not in cache:
            path = tmp_path_factory.mktemp(kind)
            hf = tiny_t5(path, **KINDS[kind])
            cache[kind] = (hf, seqjit.from_hf(path))
        return cache[kind]

    return get


def _batch(vocab=96, batch=3, src_len=30, tgt_len=25, seed=1):
    """Sources long enough to reach T5's logarithmic buckets (max_distance 20)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, src_len), generator=g)
    lengths = torch.tensor([src_len, 4, 17][:batch])
    mask = (torch.arange(src_len)[None, :] < lengths[:, None]).long()
    src = torch.where(mask.bool(), src, torch.zeros_like(src))
    tgt = torch.randint(3, vocab, (batch, tgt_len), generator=g)
    tgt[:, 0] = 0
    return src, mask, tgt, lengths


def _want(hf, src, mask, tgt):
    with torch.no_grad():
        return hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits.numpy()


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("buckets,distance", [(32, 128), (16, 20), (64, 256), (8, 9)])
def test_buckets_equal_transformers(bidirectional, buckets, distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = np.arange(-3000, 3000)
    want = T5Attention._relative_position_bucket(torch.tensor(relative), bidirectional=bidirectional,
                                                 num_buckets=buckets, max_distance=distance).numpy()
    np.testing.assert_array_equal(relative_buckets(relative, bidirectional, buckets, distance), want)


@pytest.mark.parametrize("replay", ["native", "python"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_logits_match_transformers(t5_pair, kind, replay):
    hf, model = t5_pair(kind)
    c = model.config
    assert (c.norm, c.positions, c.attention_scale, c.projection_bias, c.head_dim) == ("rms", "relative", False, False, 12)
    assert c.ffn_gated == (kind == "gated_gelu") and c.activation == ("gelu_tanh" if kind == "gated_gelu" else "relu")
    assert c.output_scale == (1.0 if kind == "gated_gelu" else 32 ** -0.5)
    model.set_replay(None if replay == "native" else "python")
    try:
        src, mask, tgt, lengths = _batch()
        want = _want(hf, src, mask, tgt)
        _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, "teacher-forced")
        _close(model.logits_stepwise(src.numpy(), tgt.numpy(), lengths.numpy()), want, "step by step")
    finally:
        model.set_replay(None)


def test_untied_head_and_more_decoder_layers(tmp_path):
    hf = tiny_t5(tmp_path, seed=4, untied_head=True, num_decoder_layers=3, feed_forward_proj="gated-gelu",
                 tie_word_embeddings=False)
    model = seqjit.from_hf(tmp_path)
    assert not model.config.tie_output and model.config.decoder_layers == 3
    src, mask, tgt, lengths = _batch()
    _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), _want(hf, src, mask, tgt), "teacher-forced")


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_generate_matches_transformers(t5_pair, kind, beam):
    hf, model = t5_pair(kind)
    sources = _sources(50, 96, seed=beam)
    ref = hf_generate(hf, model, sources, num_beams=beam, no_repeat_ngram_size=2)
    for replay in (None, "python"):
        model.set_replay(replay)
        try:
            got = model.generate(sources, beam_size=beam, max_length=10, no_repeat_ngram_size=2)
        finally:
            model.set_replay(None)
        assert [r.ids[0] for r in got] == [ids for ids, _ in ref], replay or "native"


@pytest.mark.parametrize("rule,change", [("output_scale", 1.0), ("attention_scale", True),
                                         ("relative_max_distance", 40), ("relative_buckets", 8)])
def test_a_broken_t5_rule_fails_the_comparison(t5_pair, rule, change):
    hf, model = t5_pair("relu")
    weights = dict(model.weights)
    if rule == "relative_buckets":  # the first 8 rows of each table
        for side in ("encoder", "decoder"):
            weights[f"{side}.relative_attention_bias.weight"] = weights[f"{side}.relative_attention_bias.weight"][:8]
    broken = TransformerModel(model.config.replace(**{rule: change}), weights)
    src, mask, tgt, lengths = _batch()
    want = _want(hf, src, mask, tgt)
    got = broken.logits(src.numpy(), tgt.numpy(), lengths.numpy())
    assert np.abs(got - want).max() / np.abs(want).max() > 1e-2


@pytest.mark.parametrize("changes,match", [
    ({"model_type": "umt5"}, "'umt5'.*not supported"),
    ({"feed_forward_proj": "gated-quick_gelu"}, "activation 'quick_gelu' is not supported"),
    ({"feed_forward_proj": "a-b-c"}, "feed_forward_proj 'a-b-c' is not supported"),
    ({"is_decoder": True}, "'is_decoder' true"),
])
def test_unsupported_t5_options_are_named(tmp_path, changes, match):
    tiny_t5(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, **changes}))
    if changes.get("model_type") == "umt5":
        from seqjit.convert import FROM_HF

        assert "umt5" not in FROM_HF
        with pytest.raises(ModelFormatError, match="model_type 'umt5' is not supported"):
            seqjit.from_hf(tmp_path)
        return
    with pytest.raises(ModelFormatError, match=match):
        seqjit.from_hf(tmp_path)


def test_convert_round_trip(t5_pair, tmp_path):
    """``seqjit convert`` of a T5 directory loads back to the same model (config, weights, logits)."""
    from seqjit.commands.convert import convert

    hf, model = t5_pair("gated_gelu")
    path = tmp_path / "hf"
    hf.save_pretrained(path, safe_serialization=True)
    convert(path, tmp_path / "out")
    again = seqjit.load(tmp_path / "out")
    assert again.config == model.config
    src, mask, tgt, lengths = _batch()
    np.testing.assert_array_equal(again.logits(src.numpy(), tgt.numpy(), lengths.numpy()),
                                  model.logits(src.numpy(), tgt.numpy(), lengths.numpy()))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["t5-base", "flan-t5-base"])
def test_base_sized_models(tmp_path, kind):
    """t5-base (relu, tied, rescaled) and flan-t5-base (gated-gelu, no rescale) dimensions, random
    weights with transformers' default init: logits and greedy ids against transformers."""
    sizes = dict(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072 if kind == "t5-base" else 2048, num_layers=12,
                 num_heads=12, decoder_start_token_id=0)
    if kind == "flan-t5-base":
        sizes.update(feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    torch.manual_seed(0)
    hf = transformers.T5ForConditionalGeneration(transformers.T5Config(**sizes)).eval()
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = seqjit.from_hf(tmp_path)
    src, mask, tgt, lengths = _batch(vocab=32128)
    _close(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), _want(hf, src, mask, tgt), "teacher-forced")
    sources = [s[:n].tolist() for s, n in zip(src, lengths)]
    ref = hf_generate(hf, model, sources, num_beams=1)
    assert [r.ids[0] for r in model.generate(sources, max_length=10)] == [ids for ids, _ in ref]
