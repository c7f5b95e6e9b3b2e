"""Import an OpenNMT-py (3.x) Transformer (``encoder_type`` and ``decoder_type`` transformer) as
seqjit's ``transformer`` model; :func:`seqjit.convert.from_opennmt` calls
:func:`from_opennmt_transformer` for such options.

OpenNMT-py's layers (``encoders/transformer.py``, ``decoders/transformer.py``,
``modules/position_ffn.py``): pre-norm, final LayerNorms on both sides,
attention projections without biases (``add_qkvbias`` false), 1/sqrt(head size) scaling (3.5's
default ``self_attn_type`` scaled-dot-flash is the same attention: PyTorch's fused kernel on a GPU,
its own matmuls on the CPU), a feed-forward ``w_2(act(w_1(norm(x)))) + x`` (act
``pos_ffn_activation_fn``: relu, gelu, silu) with biases (``add_ffnbias``, true before 3.5: the
attention then gets zero biases, the same sums) or without (3.5's default: seqjit's
``projection_bias`` false), LayerNorm eps ``norm_eps``, embeddings times sqrt(dim) plus the sinusoid table
stored in the state dict (``make_embedding.pe.pe``: read as seqjit's position table, so its own
float32 rounding and either layout, interleaved or concat, come along), and the generator's
linear (with bias) as the output layer. Name map (L: layer)::

    {encoder,decoder}.embeddings.make_embedding.emb_luts.0.weight -> {encoder,decoder}.embed_tokens.weight
                                                                     (x sqrt(E), folded)
    {encoder,decoder}.embeddings.make_embedding.pe.pe [P, 1, E]    -> {encoder,decoder}.embed_positions.weight
    encoder.transformer.L.self_attn.linear_{query,keys,values}     -> encoder.layers.L.self_attn.{q,k,v}_proj
    *.self_attn.final_linear, *.context_attn.final_linear         -> ....out_proj
    decoder.transformer_layers.L.self_attn / .context_attn         -> decoder.layers.L.self_attn / .encoder_attn
    encoder.transformer.L.layer_norm, decoder...layer_norm_1       -> ...self_attn_layer_norm
    decoder.transformer_layers.L.layer_norm_2                      -> ...encoder_attn_layer_norm
    *.feed_forward.layer_norm, .w_1, .w_2                          -> ...final_layer_norm, fc1, fc2
    {encoder,decoder}.layer_norm                                   -> the same (final norms)
    generator.{weight,bias}                                        -> lm_head.weight, final_logits_bias

Like OpenNMT-py's RNN models, its searches ban no token (``suppress_pad_token`` false). Options
seqjit does not run (relative or rotary positions, average attention, alignment heads, qkv biases,
RMS norms, parallel residuals, grouped keys/values, sliding windows, experts, other activations, no
sinusoid; and those of :mod:`seqjit.convert.opennmt_options`) raise :class:`ConfigError` naming
the option.
"""
from __future__ import annotations

import math
import re

import numpy as np

from seqjit.convert.opennmt_options import check_options
from seqjit.errors import ConfigError, ModelFormatError

_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "silu"}
#: option -> the values seqjit runs (absent options take OpenNMT-py 3.0's default)
#: (3.5's self_attn_type "scaled-dot-flash" is the same scaled-dot attention: PyTorch's
#: scaled_dot_product_attention on a GPU, OpenNMT-py's own matmul-softmax-matmul on the CPU)
_MUST = {"max_relative_positions": (0,), "relative_positions_buckets": (0,),
         "self_attn_type": ("scaled-dot", "scaled-dot-flash"), "add_qkvbias": (False,), "add_ffnbias": (True, False),
         "position_encoding": (True,), "position_encoding_type": ("SinusoidalInterleaved", "SinusoidalConcat"),
         "layer_norm": ("standard",), "parallel_residual": (False,), "shared_layer_norm": (False,),
         "multiquery": (False,), "num_kv": (0,), "sliding_window": (0,), "num_experts": (0,),
         "copy_attn": (False,), "lambda_align": (0.0,)}
_RENAME = [(r"^encoder\.transformer\.(\d+)\.", r"encoder.layers.\1."),
           (r"^decoder\.transformer_layers\.(\d+)\.", r"decoder.layers.\1."),
           (r"\.context_attn\.", ".encoder_attn."),
           (r"\.linear_query\.", ".q_proj."), (r"\.linear_keys\.", ".k_proj."), (r"\.linear_values\.", ".v_proj."),
           (r"\.final_linear\.", ".out_proj."),
           (r"^encoder\.layers\.(\d+)\.layer_norm\.", r"encoder.layers.\1.self_attn_layer_norm."),
           (r"^decoder\.layers\.(\d+)\.layer_norm_1\.", r"decoder.layers.\1.self_attn_layer_norm."),
           (r"^decoder\.layers\.(\d+)\.layer_norm_2\.", r"decoder.layers.\1.encoder_attn_layer_norm."),
           (r"\.feed_forward\.layer_norm\.", ".final_layer_norm."),
           (r"\.feed_forward\.w_1\.", ".fc1."), (r"\.feed_forward\.w_2\.", ".fc2."),
           (r"^generator\.weight$", "lm_head.weight"), (r"^generator\.bias$", "final_logits_bias")]


def _check(opt: dict) -> None:
    check_options(opt, _MUST, kind=" for a Transformer")
    act = opt.get("pos_ffn_activation_fn", "relu")
    if act not in _ACTIVATIONS:
        raise ConfigError(f"from_opennmt: option pos_ffn_activation_fn={act!r} is not supported ({sorted(_ACTIVATIONS)})")
    for key in ("enc_layers", "dec_layers", "heads", "transformer_ff"):
        if key not in opt:
            raise ConfigError(f"from_opennmt: option {key!r} is missing (pass vars(checkpoint['opt']))")


def from_opennmt_transformer(state_dict: dict, opt: dict, *, device: str = "cpu", backend=None, **config):
    """A ``transformer`` model from an OpenNMT-py Transformer's ``state_dict`` (generator included)
    and its options dict (module docstring); ``config``: seqjit keywords overriding the derived ones."""
    from seqjit.convert.common import cast_floats, to_numpy_dict, unused_error
    from seqjit.models.devices import check_device
    from seqjit.models.transformer import TransformerConfig, TransformerModel
    from seqjit.models.weights_file import check_finite

    check_device(device)
    _check(opt)
    sd = to_numpy_dict(state_dict)
    check_finite("state_dict", sd)
    out = {}
    for side in ("encoder", "decoder"):
        p = f"{side}.embeddings.make_embedding"
        for name in (f"{p}.emb_luts.0.weight", f"{p}.pe.pe"):
            if name not in sd:
                raise ModelFormatError(f"from_opennmt: state_dict has no {name!r}")
        if any(k.startswith(f"{p}.emb_luts.") and k != f"{p}.emb_luts.0.weight" for k in sd):
            raise ConfigError(f"from_opennmt: {side} features (several emb_luts) are not supported")
        table = sd.pop(f"{p}.emb_luts.0.weight")
        out[f"{side}.embed_tokens.weight"] = table * np.asarray(math.sqrt(table.shape[1]), table.dtype)
        pe = sd.pop(f"{p}.pe.pe")
        out[f"{side}.embed_positions.weight"] = pe.reshape(pe.shape[0], pe.shape[-1])
    for key, value in sd.items():
        new = key
        for pattern, repl in _RENAME:
            new = re.sub(pattern, repl, new)
        out[new] = value
    if "lm_head.weight" not in out:
        raise ModelFormatError("from_opennmt: state_dict has no 'generator.weight' (add checkpoint['generator'] "
                               "under 'generator.')")
    ffn_bias = any(re.search(r"\.fc[12]\.bias$", k) for k in out)
    if ffn_bias != opt.get("add_ffnbias", True):
        raise ModelFormatError(f"from_opennmt: option add_ffnbias={opt.get('add_ffnbias', True)!r}, but the state dict "
                               f"{'holds' if ffn_bias else 'has no'} feed-forward biases (feed_forward.w_1.bias)")
    if ffn_bias:  # OpenNMT-py's attention projections have no bias (add_qkvbias false): zeros, the same sums
        for name in [k for k in out if re.search(r"\.(self_attn|encoder_attn)\.(q|k|v|out)_proj\.weight$", k)]:
            bias = name[:-len("weight")] + "bias"
            out.setdefault(bias, np.zeros(out[name].shape[0], out[name].dtype))
    E = out["decoder.embed_tokens.weight"].shape[1]
    derived = dict(src_vocab_size=out["encoder.embed_tokens.weight"].shape[0],
                   tgt_vocab_size=out["decoder.embed_tokens.weight"].shape[0], d_model=E,
                   encoder_layers=opt["enc_layers"], decoder_layers=opt["dec_layers"], encoder_heads=opt["heads"],
                   decoder_heads=opt["heads"], encoder_ffn_dim=opt["transformer_ff"], decoder_ffn_dim=opt["transformer_ff"],
                   activation=_ACTIVATIONS[opt.get("pos_ffn_activation_fn", "relu")], norm_first=True,
                   layer_norm_eps=float(opt.get("norm_eps", 1e-6)), projection_bias=ffn_bias, positions="learned", max_positions=out["encoder.embed_positions.weight"].shape[0],
                   encoder_final_norm=True, decoder_final_norm=True, share_embeddings=False, tie_output=False,
                   final_logits_bias="final_logits_bias" in out, pad_id=1, decoder_start_id=2, eos_id=3,
                   suppress_pad_token=False)
    tc = TransformerConfig.from_dict({**derived, **config}, where="from_opennmt")
    unused = set(out) - set(TransformerModel.weight_spec(tc))
    if unused:
        raise unused_error("from_opennmt", unused)
    model = TransformerModel(tc, cast_floats(out, tc.dtype), backend=backend, source="from_opennmt")
    return model.prepare() if device == "cpu" else model.to(device)


__all__ = ["from_opennmt_transformer"]
