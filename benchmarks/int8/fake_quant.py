"""Simulated ("fake") quantization of a transformers MarianMTModel, for measuring where int8 error
comes from: each chosen ``nn.Linear`` gets its weight rounded per output row and its input rounded
per row on every call, in float arithmetic, with a selectable bit width and weight-scale rule. The
default (8 bits, ``amax`` scales, every linear and the embedding table) is seqjit's int8 scheme
(kernels/linear_int8/reference.py) up to float32 summation order.

    model = fake_quantize(hf, bits=8, weights=True, activations=True, only=None)

``only``: a predicate on the linear's name (``model.encoder.layers.0.fc1``, ``lm_head``, ...) or
None for every linear; ``rule`` / ``activation_rule``: how weight / activation rows are scaled
(see :func:`round_rows`); ``embeddings``: round the token table where it is read as an embedding (an
untied copy, so the output projection's rounding is chosen separately).
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn


def _levels(bits: int) -> float:
    return float(2 ** (bits - 1) - 1)


def round_rows(x: torch.Tensor, bits: int = 8, rule: str = "amax") -> torch.Tensor:
    """x rounded per row (last axis) to ``bits``-bit symmetric integers times a per-row scale.
    rule ``amax``: scale = max|x| / L (seqjit's); ``mse``: the clip (a fraction of max|x| from
    0.5 to 1) that minimises the row's squared rounding error, searched on a grid of 101 values."""
    L = _levels(bits)
    amax = x.abs().amax(dim=-1, keepdim=True)
    if rule == "amax":
        scale = torch.where(amax > 0, amax / L, torch.ones_like(amax))
        return torch.clamp(torch.round(x / scale), -L, L) * scale
    if rule != "mse":
        raise ValueError(f"rule must be 'amax' or 'mse', got {rule!r}")
    best, best_err = None, None
    for frac in np.linspace(0.5, 1.0, 101):
        scale = torch.where(amax > 0, amax * frac / L, torch.ones_like(amax))
        q = torch.clamp(torch.round(x / scale), -L, L) * scale
        err = ((q - x) ** 2).sum(dim=-1, keepdim=True)
        if best is None:
            best, best_err = q, err
        else:
            take = err < best_err
            best, best_err = torch.where(take, q, best), torch.where(take, err, best_err)
    return best


class _QuantInput(nn.Module):
    def __init__(self, linear: nn.Linear, bits: int, rule: str):
        super().__init__()
        self.linear, self.bits, self.rule = linear, bits, rule

    def forward(self, x):
        return self.linear(round_rows(x, self.bits, self.rule))


def linear_names(model) -> list:
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]


def fake_quantize(hf, bits: int = 8, weights: bool = True, activations: bool = True, only=None,
                  embeddings: bool = True, rule: str = "amax", activation_rule: str = "amax"):
    """A deep copy of ``hf`` with the chosen linears (and the embedding table) rounded; see the module
    docstring."""
    model = copy.deepcopy(hf)
    with torch.no_grad():
        # untie: the output projection and the embedding tables get their own copies
        table = model.model.shared.weight.detach().clone()
        model.lm_head.weight = nn.Parameter(table.clone())
        emb = nn.Parameter(round_rows(table, bits, rule) if embeddings else table.clone())
        model.model.shared.weight = emb
        model.model.encoder.embed_tokens.weight = emb
        model.model.decoder.embed_tokens.weight = emb
        for name in linear_names(model):
            if only is not None and not only(name):
                continue
            parent, _, leaf = name.rpartition(".")
            owner = model.get_submodule(parent) if parent else model
            lin = getattr(owner, leaf)
            if weights:
                lin.weight.copy_(round_rows(lin.weight, bits, rule))
            if activations:
                setattr(owner, leaf, _QuantInput(lin, bits, activation_rule))
    return model.eval()


def perturb(hf, rel: float, seed: int = 0):
    """A copy of ``hf`` with every weight matrix (linears and the table) multiplied elementwise by
    (1 + rel * N(0, 1)): a float-only perturbation of a chosen size, for comparison."""
    model = copy.deepcopy(hf)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed_positions" not in name:
                p.mul_(1 + rel * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model.eval()
