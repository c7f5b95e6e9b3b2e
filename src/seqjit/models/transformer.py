"""The Transformer encoder-decoder (Vaswani et al.; Marian/BART-style options).

Config (:class:`TransformerConfig`): sizes, ``activation`` (relu, gelu, gelu_tanh, silu),
``norm_first`` (pre-norm) or post-norm, token embeddings times sqrt(d_model) when
``scale_embedding``, ``positions`` ("sinusoidal" in the "interleaved", "halves" (Marian, Pegasus) or
"fairseq" (M2M100/NLLB) layout, "learned" (BART, mBART), or "none"), a ``position_offset`` (the table
row of the first position: BART 2, M2M100 ``pad_id + 1``), ``padding_positions`` (positions count
non-pad tokens only and pad tokens get none: M2M100), optional ``layernorm_embedding``, optional
final layer norms (``encoder_final_norm``, ``decoder_final_norm``), encoder/decoder token
embeddings shared or not, output projection tied to the decoder embedding or not, and an optional
``final_logits_bias``. T5 options: ``norm`` "rms" (RMSNorm: weight only, no mean), ``head_dim`` (inner
attention size heads * head_dim, not d_model), no ``projection_bias``, no ``attention_scale``
(no 1/sqrt(head_dim)), ``ffn_gated`` (fc2(act(fc1 x) * fc1_gate x)), ``positions`` "relative" (one
bucketed bias table per side, ``relative_buckets`` / ``relative_max_distance``, computed once per
graph and shared by the layers; cross-attention has none) and ``output_scale`` (the decoder output
times d_model**-0.5 before a tied projection). Decoding rules: ``forced_bos_id`` (the first
generated token, e.g. the target language of mBART-50/M2M100/NLLB) and ``forced_eos_id`` (the token
forced at the last allowed step, BART/Pegasus), both None when the model has none.

Weights (names follow Hugging Face BART/Marian), E = d_model, F = ffn dim::

    shared.weight [V, E]                    (share_embeddings) or
    encoder.embed_tokens.weight [Vs, E], decoder.embed_tokens.weight [Vt, E]
    {encoder,decoder}.embed_positions.weight [max_positions + position_offset, E]   (learned)
    {encoder,decoder}.layernorm_embedding.{weight,bias} [E]                          (layernorm_embedding)
    encoder.layers.{i}.self_attn.{q,k,v,out}_proj.{weight [E, E], bias [E]}
    encoder.layers.{i}.{self_attn_layer_norm,final_layer_norm}.{weight,bias} [E]
    encoder.layers.{i}.fc1.{weight [F, E], bias [F]}, .fc2.{weight [E, F], bias [E]}
    decoder.layers.{i}.{self_attn,encoder_attn}.{q,k,v,out}_proj.*, fc1.*, fc2.*,
    decoder.layers.{i}.{self_attn_layer_norm,encoder_attn_layer_norm,final_layer_norm}.*
    {encoder,decoder}.layer_norm.{weight,bias} [E]                                   (final norms)
    {encoder,decoder}.relative_attention_bias.weight [relative_buckets, heads]      (relative)
    ...layers.{i}.fc1_gate.weight [F, E]                                             (ffn_gated)
    lm_head.weight [Vt, E]                  (unless tie_output)
    final_logits_bias [Vt]                  (final_logits_bias)

With ``norm`` "rms" a norm has no bias; without ``projection_bias`` no projection has one; with
``head_dim`` set, q/k/v are [H * head_dim, E] and out_proj [E, H * head_dim].

Graphs: see :mod:`seqjit.models.transformer_graphs`; the decoder-step contract is in
:mod:`seqjit.models.base`. :meth:`TransformerModel.logits` runs teacher forcing through a
full-sequence (causal) decoder graph; :meth:`~seqjit.models.base.Seq2SeqModel.logits_stepwise`
runs the same through the decoder-step graph.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqjit.errors import ConfigError
from seqjit.graph.ops import TensorSpec
from seqjit.models import transformer_graphs as graphs
from seqjit.models.base import Seq2SeqModel
from seqjit.models.config import check_suppression, MAX_POSITIONS, ModelConfig, choice, positive
from seqjit.models.quantization import ARITHMETICS, SCHEMES, quantized_spec


@dataclass
class TransformerConfig(ModelConfig):
    arch = "transformer"

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    activation: str = choice("relu", ("relu", "gelu", "gelu_tanh", "silu"))
    norm_first: bool = False
    norm: str = choice("layer", ("layer", "rms"))
    layer_norm_eps: float = 1e-5
    head_dim: int | None = None
    projection_bias: bool = True
    attention_scale: bool = True
    ffn_gated: bool = False
    relative_buckets: int = 32
    relative_max_distance: int = 128
    output_scale: float = 1.0
    scale_embedding: bool = False
    positions: str = choice("sinusoidal", ("sinusoidal", "learned", "relative", "none"))
    position_layout: str = choice("interleaved", ("interleaved", "halves", "fairseq"))
    max_positions: int = 1024
    position_offset: int = 0
    padding_positions: bool = False
    layernorm_embedding: bool = False
    encoder_final_norm: bool = False
    decoder_final_norm: bool = False
    share_embeddings: bool = False
    tie_output: bool = True
    final_logits_bias: bool = False
    pad_id: int = 0
    decoder_start_id: int = 1
    eos_id: int = 2
    forced_bos_id: int | None = None
    forced_eos_id: int | None = None
    #: the end tokens (any of them ends a hypothesis: a Hugging Face eos_token_id list), the default of the
    #: decoding option end_token; None: eos_id alone
    end_token: list | None = None
    # suppression rules: the defaults of the decoding options of the same names (DecodingOptions)
    suppress_tokens: list | None = None
    begin_suppress_tokens: list | None = None
    bad_words_ids: list | None = None
    suppress_pad_token: bool = True
    dtype: str = choice("float32", ("float32", "float64"))
    quantization: str = choice("none", SCHEMES)  # "int8", "float16", "bfloat16": seqjit.models.quantization
    arithmetic: str = choice("float32", ARITHMETICS)  # "bfloat16": bf16 products (bfloat16 weights only)

    def validate(self, where: str = "config") -> None:
        positive(where, src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size, d_model=self.d_model,
                 encoder_layers=self.encoder_layers, decoder_layers=self.decoder_layers,
                 encoder_heads=self.encoder_heads, decoder_heads=self.decoder_heads,
                 encoder_ffn_dim=self.encoder_ffn_dim, decoder_ffn_dim=self.decoder_ffn_dim,
                 max_positions=self.max_positions)
        for side in ("encoder", "decoder"):
            heads = getattr(self, f"{side}_heads")
            if self.head_dim is not None:
                positive(where, head_dim=self.head_dim)
            elif self.d_model % heads:
                raise ConfigError(f"{where}: d_model {self.d_model} must be divisible by {side}_heads {heads}")
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"{where}: sinusoidal positions need an even d_model, got {self.d_model}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(f"{where}: share_embeddings needs src_vocab_size == tgt_vocab_size, "
                              f"got {self.src_vocab_size} and {self.tgt_vocab_size}")
        if self.position_offset < 0:
            raise ConfigError(f"{where}: position_offset must be >= 0, got {self.position_offset}")
        if self.position_offset > MAX_POSITIONS:
            raise ConfigError(f"{where}: position_offset {self.position_offset} exceeds {MAX_POSITIONS}")
        if self.padding_positions and not (self.positions != "none" and self.position_offset >= 1):
            raise ConfigError(f"{where}: padding_positions needs a position table and position_offset >= 1 "
                              f"(fairseq: pad_id + 1), got positions {self.positions!r}, offset {self.position_offset}")
        if self.padding_positions and self.decoder_start_id == self.pad_id:
            raise ConfigError(f"{where}: padding_positions needs decoder_start_id != pad_id (the decoder step counts "
                              f"every previous token as a position), both are {self.pad_id}")
        if self.positions == "relative":
            positive(where, relative_buckets=self.relative_buckets, relative_max_distance=self.relative_max_distance)
            if self.relative_buckets < 4 or 2 * self.relative_max_distance <= self.relative_buckets:
                raise ConfigError(f"{where}: relative_buckets must be >= 4 and below 2 * relative_max_distance, got "
                                  f"{self.relative_buckets} and {self.relative_max_distance}")
        if self.output_scale != 1.0 and not self.decoder_final_norm:
            raise ConfigError(f"{where}: output_scale needs decoder_final_norm (it is folded into that norm's weight)")
        if self.positions == "sinusoidal" and self.position_layout == "fairseq" and self.d_model < 4:
            raise ConfigError(f"{where}: the fairseq sinusoidal layout needs d_model >= 4, got {self.d_model}")
        if self.quantization != "none" and self.dtype != "float32":
            raise ConfigError(f"{where}: quantization {self.quantization!r} needs dtype float32, got {self.dtype}")
        if self.arithmetic != "float32" and self.quantization != "bfloat16":
            raise ConfigError(f"{where}: arithmetic {self.arithmetic!r} needs quantization 'bfloat16', got "
                              f"{self.quantization!r}")
        if not self.layer_norm_eps > 0:
            raise ConfigError(f"{where}: layer_norm_eps must be positive, got {self.layer_norm_eps}")
        for key in ("pad_id", "decoder_start_id", "eos_id", "forced_bos_id", "forced_eos_id"):
            value = getattr(self, key)
            if value is not None and not 0 <= value < self.tgt_vocab_size:
                raise ConfigError(f"{where}: {key} {value} is outside the target vocabulary [0, {self.tgt_vocab_size})")
        check_suppression(self, where, self.tgt_vocab_size)


class TransformerModel(Seq2SeqModel):
    """See the module docstring. Build with ``TransformerModel(config, weights)``,
    :func:`seqjit.convert.from_torch`, :func:`seqjit.convert.from_hf` or :func:`seqjit.load`."""

    arch = "transformer"
    config_class = TransformerConfig

    @classmethod
    def weight_spec(cls, config: TransformerConfig) -> dict:
        c = config
        dt = np.dtype(c.dtype)
        E = c.d_model
        spec: dict = {}

        def add(name, *shape):
            spec[name] = TensorSpec(tuple(shape), dt)

        def norm(prefix):
            add(prefix + ".weight", E)
            if c.norm == "layer":
                add(prefix + ".bias", E)

        def attention(prefix, heads):
            inner = heads * (c.head_dim or E // heads)
            for n in ("q", "k", "v", "out"):
                add(f"{prefix}.{n}_proj.weight", *((E, inner) if n == "out" else (inner, E)))
                if c.projection_bias:
                    add(f"{prefix}.{n}_proj.bias", E if n == "out" else inner)

        if c.share_embeddings:
            add("shared.weight", c.src_vocab_size, E)
        else:
            add("encoder.embed_tokens.weight", c.src_vocab_size, E)
            add("decoder.embed_tokens.weight", c.tgt_vocab_size, E)
        for side in ("encoder", "decoder"):
            heads = getattr(c, f"{side}_heads")
            if c.positions == "learned":
                add(f"{side}.embed_positions.weight", c.max_positions + c.position_offset, E)
            if c.positions == "relative":
                add(f"{side}.relative_attention_bias.weight", c.relative_buckets, heads)
            if c.layernorm_embedding:
                norm(f"{side}.layernorm_embedding")
            ffn = getattr(c, f"{side}_ffn_dim")
            for i in range(getattr(c, f"{side}_layers")):
                p = f"{side}.layers.{i}"
                attention(f"{p}.self_attn", heads)
                norm(f"{p}.self_attn_layer_norm")
                if side == "decoder":
                    attention(f"{p}.encoder_attn", heads)
                    norm(f"{p}.encoder_attn_layer_norm")
                for fc in ("fc1", "fc1_gate") if c.ffn_gated else ("fc1",):
                    add(f"{p}.{fc}.weight", ffn, E)
                    if c.projection_bias:
                        add(f"{p}.{fc}.bias", ffn)
                add(f"{p}.fc2.weight", E, ffn)
                if c.projection_bias:
                    add(f"{p}.fc2.bias", E)
                norm(f"{p}.final_layer_norm")
            if getattr(c, f"{side}_final_norm"):
                norm(f"{side}.layer_norm")
        if not c.tie_output:
            add("lm_head.weight", c.tgt_vocab_size, E)
        if c.final_logits_bias:
            add("final_logits_bias", c.tgt_vocab_size)
        return quantized_spec(spec, c)

    def build_encoder_graph(self):
        return graphs.build_encoder(self.config, self.weights)

    def build_decoder_step_graph(self, with_attention: bool = False):
        return graphs.build_decoder_step(self.config, self.weights, with_attention)

    def build_decoder_full_graph(self):
        return graphs.build_decoder_full(self.config, self.weights)

    def decoder_state_specs(self, batch: int, max_length: int) -> dict:
        shape = graphs.state_shape(self.config, batch, max_length)
        dt = np.dtype(self.config.dtype)
        specs = {}
        for i in range(self.config.decoder_layers):
            specs[f"self_k.{i}"] = TensorSpec(shape, dt)
            specs[f"self_v.{i}"] = TensorSpec(shape, dt)
        return specs

    def decoder_state_time_axes(self) -> dict:
        return {f"self_{kv}.{i}": 2 for i in range(self.config.decoder_layers) for kv in "kv"}
