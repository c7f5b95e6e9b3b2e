"""Graph builders of the Transformer encoder-decoder: encoder, decoder step, full-sequence decoder.

Shapes: B batch, S source length, T target length, E d_model, H heads, Dh = E / H, V vocabulary,
M the decoder state's max_length. Weight names are those of
:meth:`seqjit.models.transformer.TransformerModel.weight_spec`. The builders emit separate
``linear`` and activation nodes and one ``linear`` per projection; the executor's passes fuse the
activations and merge Q/K/V (and every layer's cross-attention K/V) into single GEMMs.

Positions: rows of a table (``position_rows`` / ``position_at`` from ``position_offset``), rows counted
over non-pad tokens (``padded_positions``, M2M100; the step uses ``position_at``: the previous tokens
are never pad), or T5's relative bias (``relative_bias`` once per encoder / full-decoder graph,
``relative_bias_at`` once per step; every self-attention layer adds it through ``biased_attention``).
"""
from __future__ import annotations

import math

import numpy as np

from seqjit.graph import GraphBuilder
from seqjit.models.base import ATTENTION, LOGITS, MEMORY, NEXT, PREV_TOKENS, SRC_IDS, SRC_LENGTHS, STEP
from seqjit.models.quantization import SCALE, linear

_ACTIVATION_OPS = {"relu": ("relu", {}), "gelu": ("gelu", {}), "gelu_tanh": ("gelu", {"approximate": "tanh"}),
                   "silu": ("silu", {})}


class _Layers:
    """Shared pieces: weights as graph constants, projections, norms, residual blocks, FFN."""

    def __init__(self, g: GraphBuilder, config, weights: dict):
        self.g, self.c, self.weights = g, config, weights

    def w(self, name: str) -> str:
        return self.g.constant(name, self.weights[name])

    def linear(self, x, prefix):
        """``linear`` (``linear_int8`` / ``linear_half`` for a quantized model) of weight ``prefix.weight`` (and
        ``prefix.bias`` when the config's projections have biases)."""
        bias = self.w(prefix + ".bias") if self.c.projection_bias else None
        return linear(self.g, x, self.weights, prefix + ".weight", bias, config=self.c, name=prefix)

    def norm(self, x, prefix, scale: float = 1.0):
        """Layer norm, or RMS norm (``norm`` "rms"), of weight ``prefix.weight``; ``scale``: folded
        into the weight (T5's output rescale)."""
        c = self.c
        if scale == 1.0:
            weight = self.w(prefix + ".weight")
        else:
            value = (self.weights[prefix + ".weight"] * np.asarray(scale, self.weights[prefix + ".weight"].dtype))
            weight = self.g.constant(f"{prefix}.weight*{scale!r}", value)
        if c.norm == "rms":
            return self.g.op("rms_norm", x, weight, eps=c.layer_norm_eps, name=prefix)
        return self.g.op("layer_norm", x, weight, self.w(prefix + ".bias"), eps=c.layer_norm_eps, name=prefix)

    @property
    def attention_scale(self):
        """The ``scale`` attribute of the attention ops: None (1/sqrt(head dim)) or 1 (T5)."""
        return None if self.c.attention_scale else 1.0

    def attend(self, q, k, v, lengths, bias, name, causal=False):
        """Attention (``biased_attention`` when a relative position ``bias`` is given)."""
        scale = self.attention_scale
        if bias is not None:
            args = (q, k, v, bias) + (() if lengths is None else (lengths,))
            return self.g.op("biased_attention", *args, causal=causal, scale=scale, name=name)
        args = (q, k, v) + (() if lengths is None else (lengths,))
        return self.g.op("attention", *args, causal=causal, scale=scale, name=name)

    def relative_bias(self, side: str, like):
        """The [1, H, L, L] relative position bias of a whole sequence (None without relative positions)."""
        c = self.c
        if c.positions != "relative":
            return None
        return self.g.op("relative_bias", self.w(f"{side}.relative_attention_bias.weight"), like,
                         bidirectional=side == "encoder", max_distance=c.relative_max_distance, name=f"{side}.relative_bias")

    def residual(self, x, norm_prefix, body):
        """Pre-norm: ``x + body(norm(x))``; post-norm: ``norm(x + body(x))``."""
        if self.c.norm_first:
            return self.g.op("add", x, body(self.norm(x, norm_prefix)))
        return self.norm(self.g.op("add", x, body(x)), norm_prefix)

    def ffn(self, prefix):
        op, attrs = _ACTIVATION_OPS[self.c.activation]

        def body(h):
            a = self.g.op(op, self.linear(h, prefix + ".fc1"), **attrs)
            if self.c.ffn_gated:
                a = self.g.op("mul", a, self.linear(h, prefix + ".fc1_gate"), name=prefix + ".gate")
            return self.linear(a, prefix + ".fc2")

        return body

    def embed(self, side: str, ids, positions, layernorm: bool = True):
        """Token embedding (times sqrt(E) when scale_embedding) plus positions, then the optional
        embedding layer norm. ``positions``: [L, E] rows along the last ids axis, or None."""
        c = self.c
        name = "shared.weight" if c.share_embeddings else f"{side}.embed_tokens.weight"
        table = self.w(name)
        scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0
        if self.weights[name].dtype == np.int8:  # a quantized model's table: int8 rows, per-row scales
            args = (ids, table, self.w(name + SCALE)) + (() if positions is None else (positions,))
            x = self.g.op("embedding_int8", *args, scale=scale, name=f"{side}.embed")
        elif self.weights[name].dtype == np.uint16:  # a 16-bit model's table: the format's bits
            args = (ids, table) if positions is None else (ids, table, positions)
            x = self.g.op("embedding_half", *args, fmt=c.quantization, scale=scale, name=f"{side}.embed")
        else:
            args = (ids, table) if positions is None else (ids, table, positions)
            x = self.g.op("embedding", *args, scale=scale, name=f"{side}.embed")
        if c.layernorm_embedding and layernorm:
            x = self.norm(x, f"{side}.layernorm_embedding")
        return x

    def embed_sequence(self, side: str, ids):
        """:meth:`embed` of ids [B, L] with the positions of a whole sequence (the encoder, or the
        decoder teacher-forced): rows ``offset ..`` of the table, or with ``padding_positions`` the
        rows counted over non-pad tokens (a [B, L, E] value added after the scaled embedding)."""
        c, g = self.c, self.g
        table = self.position_table(side)
        if table is None:
            return self.embed(side, ids, None)
        if not c.padding_positions:
            return self.embed(side, ids, g.op("position_rows", table, ids, offset=self.offset))
        positions = g.op("padded_positions", table, ids, pad_id=c.pad_id, offset=self.offset, name=f"{side}.positions")
        layernorm = c.layernorm_embedding
        x = self.embed(side, ids, None, layernorm=False)
        x = g.op("add", x, positions)
        return self.norm(x, f"{side}.layernorm_embedding") if layernorm else x

    def position_table(self, side: str):
        """The position table ([max_positions + offset, E]) as a graph value, or None."""
        c = self.c
        if c.positions == "learned":
            return self.w(f"{side}.embed_positions.weight")
        if c.positions == "sinusoidal" and c.position_layout == "fairseq":
            return self.g.op("fairseq_positions", length=c.max_positions + c.position_offset, dim=c.d_model,
                             dtype=c.dtype, name=f"{side}.sinusoidal_positions")
        if c.positions == "sinusoidal":
            return self.g.op("sinusoidal_positions", length=c.max_positions + c.position_offset, dim=c.d_model,
                             layout=c.position_layout, dtype=c.dtype, name=f"{side}.sinusoidal_positions")
        return None

    def output_weight_name(self) -> str:
        c = self.c
        if not c.tie_output:
            return "lm_head.weight"
        return "shared.weight" if c.share_embeddings else "decoder.embed_tokens.weight"

    def logits(self, h):
        bias = self.w("final_logits_bias") if self.c.final_logits_bias else None
        return linear(self.g, h, self.weights, self.output_weight_name(), bias, config=self.c, name="lm_head")

    @property
    def offset(self) -> int:
        """The table row of position 0 (BART's learned table: 2; M2M100: pad_id + 1)."""
        return self.c.position_offset


def build_encoder(config, weights: dict):
    """src_ids [B, S], src_lengths [B] -> memory [B, S, E], cross_k.{i} / cross_v.{i} [B, H, S, Dh]."""
    c = config
    g = GraphBuilder("encoder")
    L = _Layers(g, c, weights)
    ids = g.input(SRC_IDS, dtype="int", ndim=2)
    lengths = g.input(SRC_LENGTHS, dtype="int", ndim=1)
    x = L.embed_sequence("encoder", ids)
    bias = L.relative_bias("encoder", ids)
    heads = c.encoder_heads
    for i in range(c.encoder_layers):
        p = f"encoder.layers.{i}"

        def self_attention(h, p=p):
            q, k, v = (g.op("split_heads", L.linear(h, f"{p}.self_attn.{n}_proj"), heads=heads) for n in "qkv")
            o = L.attend(q, k, v, lengths, bias, f"{p}.self_attn")
            return L.linear(g.op("merge_heads", o), f"{p}.self_attn.out_proj")

        with g.scope(p):
            x = L.residual(x, f"{p}.self_attn_layer_norm", self_attention)
            x = L.residual(x, f"{p}.final_layer_norm", L.ffn(p))
    if c.encoder_final_norm:
        x = L.norm(x, "encoder.layer_norm")
    g.output(x, name=MEMORY)
    for i in range(c.decoder_layers):
        for n in "kv":
            proj = L.linear(x, f"decoder.layers.{i}.encoder_attn.{n}_proj")
            g.output(g.op("split_heads", proj, heads=c.decoder_heads), name=f"cross_{n}.{i}")
    return g.build()


def _decoder_layers(g, L, x, step_inputs, src_lengths, with_attention, bias=None):
    """The decoder stack on ``x`` ([B, E] for a step, [B, T, E] for a full sequence).

    ``step_inputs``: None for the full sequence (causal self-attention over ``x``), or
    ``(step, caches)`` with ``caches[i] = (k_cache, v_cache)`` inputs: the step writes its K/V at
    position ``step`` and attends over the first ``step + 1`` cache entries. ``bias``: the relative
    position bias of the self-attention (T5), or None. Returns ``(x, weights, new_caches)``.
    """
    c = L.c
    heads = c.decoder_heads
    weights, new_caches = [], []
    self_lengths = None
    if step_inputs is not None:
        step, caches = step_inputs
        self_lengths = g.op("step_lengths", step, src_lengths, name="self_lengths")
    squeeze = step_inputs is not None
    for i in range(c.decoder_layers):
        p = f"decoder.layers.{i}"

        def self_attention(h, p=p, i=i):
            q, k, v = (L.linear(h, f"{p}.self_attn.{n}_proj") for n in "qkv")
            q = g.op("split_heads", q, heads=heads)
            if step_inputs is None:
                k, v = g.op("split_heads", k, heads=heads), g.op("split_heads", v, heads=heads)
                o = L.attend(q, k, v, None, bias, f"{p}.self_attn", causal=True)
            else:
                k = g.op("kv_write", caches[i][0], k, step, name=f"{p}.self_attn.k_cache")
                v = g.op("kv_write", caches[i][1], v, step, name=f"{p}.self_attn.v_cache")
                new_caches.append((k, v))
                o = L.attend(q, k, v, self_lengths, bias, f"{p}.self_attn")
            return L.linear(g.op("merge_heads", o, squeeze_length=squeeze), f"{p}.self_attn.out_proj")

        def cross_attention(h, p=p, i=i):
            q = g.op("split_heads", L.linear(h, f"{p}.encoder_attn.q_proj"), heads=heads)
            k, v = f"cross_k.{i}", f"cross_v.{i}"
            if with_attention:
                o, w = g.op("attention", q, k, v, src_lengths, return_weights=True, scale=L.attention_scale, outputs=2,
                            name=f"{p}.encoder_attn")
                weights.append(w)
            else:
                o = L.attend(q, k, v, src_lengths, None, f"{p}.encoder_attn")
            return L.linear(g.op("merge_heads", o, squeeze_length=squeeze), f"{p}.encoder_attn.out_proj")

        with g.scope(p):
            x = L.residual(x, f"{p}.self_attn_layer_norm", self_attention)
            x = L.residual(x, f"{p}.encoder_attn_layer_norm", cross_attention)
            x = L.residual(x, f"{p}.final_layer_norm", L.ffn(p))
    if c.decoder_final_norm:
        x = L.norm(x, "decoder.layer_norm", scale=c.output_scale)
    return x, weights, new_caches


def _cross_inputs(g, c):
    for i in range(c.decoder_layers):
        g.input(f"cross_k.{i}", dtype="float", ndim=4)
        g.input(f"cross_v.{i}", dtype="float", ndim=4)


def build_decoder_step(config, weights: dict, with_attention: bool = False):
    """prev_tokens [B], step [], src_lengths [B], cross_k/v.{i} [B, H, S, Dh], self_k/v.{i}
    [B, H, M, Dh] -> logits [B, V], (attention [B, layers, H, S]), next.self_k/v.{i} (the caches,
    updated in place at position ``step``)."""
    c = config
    g = GraphBuilder("decoder_step" + ("+attention" if with_attention else ""))
    L = _Layers(g, c, weights)
    tokens = g.input(PREV_TOKENS, dtype="int", ndim=1)
    step = g.input(STEP, dtype="int", ndim=0)
    src_lengths = g.input(SRC_LENGTHS, dtype="int", ndim=1)
    _cross_inputs(g, c)
    caches = [(g.input(f"self_k.{i}", dtype="float", ndim=4), g.input(f"self_v.{i}", dtype="float", ndim=4))
              for i in range(c.decoder_layers)]
    table = L.position_table("decoder")
    # [1, E]; with padding_positions too: the previous tokens are never pad (decoding suppresses it and
    # the start token is not pad), so step t's row is offset + t as in transformers
    position = None if table is None else g.op("position_at", table, step, offset=L.offset)
    ids = g.op("reshape", tokens, shape=(0, 1))  # [B, 1]: positions run along the last ids axis
    x = g.op("reshape", L.embed("decoder", ids, position), shape=(0, -1))  # [B, E]
    bias = None
    if c.positions == "relative":  # [1, H, 1, M]: the query at ``step`` over every cache position
        bias = g.op("relative_bias_at", L.w("decoder.relative_attention_bias.weight"), step, caches[0][0],
                    bidirectional=False, max_distance=c.relative_max_distance, name="decoder.relative_bias")
    x, weights_, new_caches = _decoder_layers(g, L, x, (step, caches), src_lengths, with_attention, bias)
    g.output(L.logits(x), name=LOGITS)
    if with_attention:
        stacked = g.op("stack", *weights_, axis=1)  # [B, layers, H, 1, S]
        g.output(g.op("reshape", stacked, shape=(0, 0, 0, -1)), name=ATTENTION)
    for i, (k, v) in enumerate(new_caches):
        g.output(k, name=f"{NEXT}self_k.{i}")
        g.output(v, name=f"{NEXT}self_v.{i}")
    return g.build()


def build_decoder_full(config, weights: dict):
    """tgt_ids [B, T], src_lengths [B], cross_k/v.{i} -> logits [B, T, V] (causal self-attention:
    teacher forcing in one pass)."""
    c = config
    g = GraphBuilder("decoder_full")
    L = _Layers(g, c, weights)
    tokens = g.input("tgt_ids", dtype="int", ndim=2)
    src_lengths = g.input(SRC_LENGTHS, dtype="int", ndim=1)
    _cross_inputs(g, c)
    x = L.embed_sequence("decoder", tokens)
    x, _, _ = _decoder_layers(g, L, x, None, src_lengths, False, L.relative_bias("decoder", tokens))
    g.output(L.logits(x), name=LOGITS)
    return g.build()


def state_shape(config, batch: int, max_length: int) -> tuple:
    """Shape of one self-attention cache: [B, H, M, Dh]."""
    h = config.decoder_heads
    return (batch, h, max_length, config.head_dim or config.d_model // h)

