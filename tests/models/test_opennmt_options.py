"""OpenNMT-py options checked by name without OpenNMT-py (default CI run): a state dict laid out as
OpenNMT-py 3.5's Transformer saves one (no projection biases: its defaults ``add_qkvbias`` and
``add_ffnbias`` false) with its default options converts, and every option value seqjit does not
run is a ConfigError naming it. That the conversion computes what OpenNMT-py computes is checked
against OpenNMT-py itself by the toolkit tests (test_opennmt_transformer.py, test_opennmt_trained.py).
"""
import numpy as np
import pytest

from seqjit.convert import from_opennmt
from seqjit.errors import ConfigError, ModelFormatError

E, FF, V, P = 4, 6, 7, 16
#: the model options OpenNMT-py 3.5.1's onmt_train writes for -encoder_type/-decoder_type transformer
#: -position_encoding (its defaults otherwise)
OPT = {"encoder_type": "transformer", "decoder_type": "transformer", "enc_layers": 1, "dec_layers": 1, "heads": 2,
       "transformer_ff": FF, "hidden_size": E, "position_encoding": True,
       "position_encoding_type": "SinusoidalInterleaved", "self_attn_type": "scaled-dot-flash", "add_qkvbias": False,
       "add_ffnbias": False, "layer_norm": "standard", "norm_eps": 1e-6, "parallel_residual": False,
       "shared_layer_norm": False, "multiquery": False, "num_kv": 0, "sliding_window": 0, "num_experts": 0,
       "max_relative_positions": 0, "relative_positions_buckets": 0, "pos_ffn_activation_fn": "relu",
       "copy_attn": False, "lambda_align": 0.0, "model_task": "seq2seq", "decoder_start_token": "<s>",
       "default_specials": ["<unk>", "<blank>", "<s>", "</s>"], "n_src_feats": 0, "lora_layers": [],
       "lora_embedding": False, "quant_layers": [], "_all_transform": set()}


def state_dict(ffn_bias=False, seed=0):
    rng = np.random.default_rng(seed)
    sd = {}

    def put(name, *shape):
        sd[name] = rng.standard_normal(shape).astype(np.float32)

    for side, tag in (("encoder", "transformer"), ("decoder", "transformer_layers")):
        put(f"{side}.embeddings.make_embedding.emb_luts.0.weight", V, E)
        put(f"{side}.embeddings.make_embedding.pe.pe", P, 1, E)
        put(f"{side}.layer_norm.weight", E)
        put(f"{side}.layer_norm.bias", E)
        p = f"{side}.{tag}.0"
        attns = ["self_attn"] + (["context_attn"] if side == "decoder" else [])
        norms = ["layer_norm"] if side == "encoder" else ["layer_norm_1", "layer_norm_2"]
        for attn in attns:
            for lin in ("linear_query", "linear_keys", "linear_values", "final_linear"):
                put(f"{p}.{attn}.{lin}.weight", E, E)
        for norm in norms + ["feed_forward.layer_norm"]:
            put(f"{p}.{norm}.weight", E)
            put(f"{p}.{norm}.bias", E)
        put(f"{p}.feed_forward.w_1.weight", FF, E)
        put(f"{p}.feed_forward.w_2.weight", E, FF)
        if ffn_bias:
            put(f"{p}.feed_forward.w_1.bias", FF)
            put(f"{p}.feed_forward.w_2.bias", E)
    put("generator.weight", V, E)
    put("generator.bias", V)
    return sd


def test_opennmt_35_transformer_defaults_convert():
    model = from_opennmt(state_dict(), {**OPT, "norm_eps": 1e-5})
    c = model.config
    assert not c.projection_bias and c.layer_norm_eps == 1e-5 and c.norm_first
    ids, lengths = np.array([[4, 5, 6]]), np.array([3])
    assert np.isfinite(model.logits(ids, np.array([[2, 4]]), lengths)).all()
    # 3.0-3.4's default add_ffnbias true: feed-forward biases read, the attention's are zeros
    assert from_opennmt(state_dict(ffn_bias=True), {**OPT, "add_ffnbias": True}).config.projection_bias


@pytest.mark.parametrize("key,value", [
    ("self_attn_type", "average"), ("layer_norm", "rms"), ("parallel_residual", True), ("shared_layer_norm", True),
    ("multiquery", True), ("num_kv", 1), ("sliding_window", 4), ("num_experts", 2), ("relative_positions_buckets", 32),
    ("position_encoding_type", "Rotary"), ("decoder_start_token", "</s>"), ("default_specials", ["<s>", "</s>"]),
    ("n_src_feats", 1), ("lora_layers", ["linear_values"]), ("lora_embedding", True), ("quant_layers", ["w_1"]),
])
def test_unsupported_opennmt_35_options_are_named(key, value):
    with pytest.raises(ConfigError, match=rf"option {key}={value!r}".replace("[", r"\[").replace("]", r"\]")):
        from_opennmt(state_dict(), {**OPT, key: value})


@pytest.mark.parametrize("key,value", [("decoder_start_token", "</s>"), ("lora_layers", ["linear_values"])])
def test_unsupported_common_options_are_named_for_rnn(key, value):
    opt = {"encoder_type": "rnn", "decoder_type": "rnn", "enc_layers": 1, "dec_layers": 1, "enc_hid_size": 4,
           "dec_hid_size": 4, key: value}
    with pytest.raises(ConfigError, match=rf"option {key}=".replace("[", r"\[")):
        from_opennmt({}, opt)


@pytest.mark.parametrize("ffn_bias,option", [(True, False), (False, True)])
def test_add_ffnbias_must_match_the_weights(ffn_bias, option):
    with pytest.raises(ModelFormatError, match=rf"add_ffnbias={option}"):
        from_opennmt(state_dict(ffn_bias=ffn_bias), {**OPT, "add_ffnbias": option})
