"""A Transformer encoder pass that stays on the GPU.

:class:`DeviceTransformerEncoder` takes a CPU :class:`~seqjit.models.transformer.TransformerModel`,
uploads its encoder weights once, and runs the encoder with the cuda kernels on numba device arrays:
only the token ids and lengths go to the device and only the final ``memory`` comes back. The
activation buffers of one batch shape are allocated once and reused for every layer and call.
"""
from __future__ import annotations

import math

import numpy as np

from seqjit import kernels
from seqjit.kernels import _cuda

from . import layout

_ACT = {"relu": ("relu", {}), "gelu": ("gelu", {}), "gelu_tanh": ("gelu", {"approximate": "tanh"}), "silu": ("silu", {})}


class DeviceTransformerEncoder:
    """The encoder of ``model`` on the GPU; ``encode(src_ids, src_lengths) -> memory`` (host)."""

    def __init__(self, model):
        cuda = _cuda.require_cuda()
        c = model.config
        if np.dtype(c.dtype) != np.float32:
            raise TypeError(f"the GPU encoder runs float32 models, this one is {c.dtype}")
        self.c, self.cuda = c, cuda
        self.k = {name: kernels.get(name, backend="cuda") for name in
                  ("embedding", "linear", "layer_norm", "attention", _ACT[c.activation][0])}
        names = [n for n in model.weight_spec(c) if n.startswith("encoder.")]
        names.append("shared.weight" if c.share_embeddings else "encoder.embed_tokens.weight")
        self.w = {n: _cuda.to_device(model.weights[n]) for n in names}  # uploaded once
        if c.positions == "sinusoidal":
            table = kernels.get("sinusoidal_positions", backend="reference")(
                c.max_positions, c.d_model, layout=c.position_layout)
            self.positions = _cuda.to_device(table)
        elif c.positions == "learned":
            self.positions = self.w["encoder.embed_positions.weight"]
        else:
            self.positions = None
        self._buffers: dict = {}

    def _bufs(self, B: int, S: int) -> dict:
        """Device activations for one (B, S), allocated once."""
        key = (B, S)
        if key not in self._buffers:
            E, H, F = self.c.d_model, self.c.encoder_heads, self.c.encoder_ffn_dim
            shapes = dict(x=(B, S, E), h=(B, S, E), t=(B, S, E), qkv=(3, B, S, E), heads=(3, B, H, S, E // H),
                          att=(B, H, S, E // H), merged=(B, S, E), ffn=(B, S, F))
            self._buffers[key] = {n: _cuda.device_empty(s, np.float32) for n, s in shapes.items()}
        return self._buffers[key]

    def _linear(self, x, prefix, out, activation=None):
        return self.k["linear"](x, self.w[prefix + ".weight"], self.w[prefix + ".bias"], activation=activation, out=out)

    def _norm(self, x, prefix, out):
        return self.k["layer_norm"](x, self.w[prefix + ".weight"], self.w[prefix + ".bias"], eps=self.c.layer_norm_eps, out=out)

    def encode(self, src_ids, src_lengths=None) -> np.ndarray:
        from seqjit.models.base import check_source

        c = self.c
        ids, lengths = check_source(src_ids, src_lengths)
        B, S = ids.shape
        offset = c.position_offset if c.positions == "learned" else 0
        if self.positions is not None and offset + S > self.positions.shape[0]:
            raise ValueError(f"src_ids has {S} positions, more than the model's {self.positions.shape[0] - offset}")
        b = self._bufs(B, S)
        table = self.w["shared.weight" if c.share_embeddings else "encoder.embed_tokens.weight"]
        scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0
        pos = None if self.positions is None else self.positions[offset:offset + S]
        # ids and lengths stay host arrays: each kernel checks them on the host, then uploads them
        x = self.k["embedding"](ids, table, scale=scale, positions=pos, out=b["x"])
        if c.layernorm_embedding:
            x = self._norm(x, "encoder.layernorm_embedding", b["h"])
            x, b["x"], b["h"] = b["h"], b["h"], b["x"]
        act_name, act_attrs = _ACT[c.activation]
        for i in range(c.encoder_layers):
            p = f"encoder.layers.{i}"
            x = self._block(x, b, f"{p}.self_attn_layer_norm", lambda h: self._self_attention(h, p, b, lengths))
            x = self._block(x, b, f"{p}.final_layer_norm", lambda h: self._ffn(h, p, b, act_name, act_attrs))
        if c.encoder_final_norm:
            x = self._norm(x, "encoder.layer_norm", b["t"])
        return _cuda.to_host(x)

    def _block(self, x, b, norm_prefix, body):
        """Pre-norm: x + body(norm(x)); post-norm: norm(x + body(x)). Returns the new x buffer."""
        if self.c.norm_first:
            y = body(self._norm(x, norm_prefix, b["h"]))
            return layout.add(x, y, b["x"])  # in place: x is b["x"]
        y = body(x)
        s = layout.add(x, y, b["t"])
        return self._norm(s, norm_prefix, b["x"])

    def _self_attention(self, h, p, b, lengths):
        H = self.c.encoder_heads
        for j, n in enumerate("qkv"):
            proj = self._linear(h, f"{p}.self_attn.{n}_proj", b["qkv"][j])
            layout.split_heads(proj, H, b["heads"][j])
        att = self.k["attention"](b["heads"][0], b["heads"][1], b["heads"][2], lengths=lengths, out=b["att"])
        return self._linear(layout.merge_heads(att, b["merged"]), f"{p}.self_attn.out_proj", b["t"] if self.c.norm_first else b["h"])

    def _ffn(self, h, p, b, act_name, act_attrs):
        mid = self._linear(h, f"{p}.fc1", b["ffn"])
        mid = self.k[act_name](mid, **act_attrs, out=mid)
        return self._linear(mid, f"{p}.fc2", b["t"] if self.c.norm_first else b["h"])
