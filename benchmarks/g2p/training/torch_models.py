"""The three G2P architectures as PyTorch modules, for training (``train.py`` beside this file) and as the
independent reference the tests compare seqjit against. Parameter names are the ones the seqjit
importers read (``seqjit.convert.from_torch``), so ``module.state_dict()`` converts as is.

- :class:`VanillaG2P` (``rnn_seq2seq``): bidirectional GRU encoder; only its final states, through
  ``tanh(bridge([h_fwd; h_bwd]))``, initialise a GRU decoder (the bottleneck).
- :class:`AttentionG2P` (``attention_seq2seq``, Bahdanau): the same encoder; the decoder starts from
  ``[h_fwd; h_bwd]`` and at every step attends over all encoder outputs (additive attention, the
  context fed with the previous phoneme into the GRU).
- :class:`TransformerG2P` (``transformer``): ``nn.Transformer`` (post-norm, final norms), token
  embeddings times sqrt(d_model) plus interleaved sinusoidal positions, an output projection with bias.

Ids: 0 pad, 1 decoder start, 2 end (see :mod:`seqjit.g2p.vocab`). Needs torch (training/test extra);
not part of the installed package (which imports no torch): tests and benchmarks put this folder on
``sys.path``.
"""
from __future__ import annotations

import math

import numpy as np

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, BOS, EOS = 0, 1, 2


class Encoder(nn.Module):
    """Embedding + bidirectional GRU over padded, batch-first sources (packed: padding never read)."""

    def __init__(self, vocab: int, embed: int, hidden: int, dropout: float):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.gru = nn.GRU(embed, hidden, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(dropout)

    def forward(self, src, lengths):
        packed = pack_padded_sequence(self.drop(self.embedding(src)), lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return out, h  # [B, S, 2H], [2, B, H]


class RNNDecoder(nn.Module):
    def __init__(self, vocab: int, embed: int, input_size: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.gru = nn.GRU(input_size, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)


class VanillaG2P(nn.Module):
    arch = "rnn_seq2seq"

    def __init__(self, src_vocab: int, tgt_vocab: int, embed: int = 64, hidden: int = 192, dropout: float = 0.1):
        super().__init__()
        self.encoder = Encoder(src_vocab, embed, hidden, dropout)
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.decoder = RNNDecoder(tgt_vocab, embed, embed, hidden)
        self.drop = nn.Dropout(dropout)
        self.seqjit_config = dict(bridge_activation="tanh")

    def start(self, src, lengths):
        _, h = self.encoder(src, lengths)
        return {"h": torch.tanh(self.bridge(torch.cat([h[0], h[1]], -1))).unsqueeze(0)}

    def forward(self, src, lengths, tgt_in):
        state = self.start(src, lengths)
        out, _ = self.decoder.gru(self.drop(self.decoder.embedding(tgt_in)), state["h"])
        return self.decoder.out(self.drop(out))

    def step(self, state, prev):
        out, state["h"] = self.decoder.gru(self.decoder.embedding(prev)[:, None], state["h"])
        return self.decoder.out(out[:, 0])


class BahdanauAttention(nn.Module):
    def __init__(self, query: int, memory: int, dim: int):
        super().__init__()
        self.Wa = nn.Linear(query, dim)
        self.Ua = nn.Linear(memory, dim)
        self.Va = nn.Linear(dim, 1)

    def forward(self, s, keys, memory, mask):
        scores = self.Va(torch.tanh(self.Wa(s)[:, None] + keys)).squeeze(-1)
        weights = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return torch.bmm(weights[:, None], memory)[:, 0], weights


class AttentionG2P(nn.Module):
    arch = "attention_seq2seq"

    def __init__(self, src_vocab: int, tgt_vocab: int, embed: int = 64, hidden: int = 128, attention: int = 128,
                 dropout: float = 0.1):
        super().__init__()
        self.encoder = Encoder(src_vocab, embed, hidden, dropout)
        memory = dec_hidden = 2 * hidden
        self.decoder = RNNDecoder(tgt_vocab, embed, embed + memory, dec_hidden)
        self.decoder.attention = BahdanauAttention(dec_hidden, memory, attention)
        self.drop = nn.Dropout(dropout)
        self.seqjit_config = dict(attention="bahdanau")

    def start(self, src, lengths):
        memory, h = self.encoder(src, lengths)
        mask = torch.arange(src.shape[1])[None] < lengths[:, None]
        return {"h": torch.cat([h[0], h[1]], -1)[None], "memory": memory, "mask": mask,
                "keys": self.decoder.attention.Ua(memory)}

    def step(self, state, prev, embedded=None):
        e = self.decoder.embedding(prev) if embedded is None else embedded
        context, weights = self.decoder.attention(state["h"][-1], state["keys"], state["memory"], state["mask"])
        out, state["h"] = self.decoder.gru(torch.cat([e, context], -1)[:, None], state["h"])
        state["weights"] = weights
        return self.decoder.out(self.drop(out[:, 0]))

    def forward(self, src, lengths, tgt_in):
        state = self.start(src, lengths)
        embedded = self.drop(self.decoder.embedding(tgt_in))
        return torch.stack([self.step(state, None, embedded[:, t]) for t in range(tgt_in.shape[1])], 1)


def sinusoid_table(length: int, dim: int) -> torch.Tensor:
    """Vaswani et al.'s encodings: sin at even, cos at odd columns, angle pos / 10000^(2i/dim)."""
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    i = torch.arange(0, dim, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, i / dim)
    table = torch.zeros(length, dim, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return table.float()


class TransformerG2P(nn.Module):
    arch = "transformer"

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 128, heads: int = 4, layers: int = 2,
                 ffn: int = 256, dropout: float = 0.1, max_len: int = 128):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        for table in (self.src_embed, self.tgt_embed):  # x sqrt(d_model) brings them to the positions' scale
            nn.init.normal_(table.weight, std=d_model ** -0.5)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, ffn, dropout, batch_first=True)
        self.generator = nn.Linear(d_model, tgt_vocab)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("positions", sinusoid_table(max_len, d_model), persistent=False)
        self.seqjit_config = dict(nhead=heads, activation="relu", scale_embedding=True, positions="sinusoidal",
                                  position_layout="interleaved", max_positions=max_len)

    def _embed(self, table, ids):
        return self.drop(table(ids) * math.sqrt(self.d_model) + self.positions[: ids.shape[1]])

    def start(self, src, lengths):
        pad = torch.arange(src.shape[1])[None] >= lengths[:, None]
        memory = self.transformer.encoder(self._embed(self.src_embed, src), src_key_padding_mask=pad)
        return {"memory": memory, "pad": pad, "prefix": torch.full((src.shape[0], 1), BOS, dtype=torch.long)}

    def decode(self, state, tgt_in):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        out = self.transformer.decoder(self._embed(self.tgt_embed, tgt_in), state["memory"], tgt_mask=causal,
                                       memory_key_padding_mask=state["pad"], tgt_is_causal=True)
        return self.generator(out)

    def forward(self, src, lengths, tgt_in):
        return self.decode(self.start(src, lengths), tgt_in)

    def step(self, state, prev):
        if prev is not None:
            state["prefix"] = torch.cat([state["prefix"], prev[:, None]], 1)
        return self.decode(state, state["prefix"])[:, -1]


ARCHITECTURES = {"gru": VanillaG2P, "attention": AttentionG2P, "transformer": TransformerG2P}


@torch.inference_mode()
def greedy(model: nn.Module, src, lengths, max_length: int) -> list:
    """Greedy decoding of a batch with the PyTorch module (the tests' reference); ids without the end."""
    model.eval()
    state = model.start(src, lengths)
    prev = torch.full((src.shape[0],), BOS, dtype=torch.long)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    out = [[] for _ in range(src.shape[0])]
    for t in range(max_length):
        logits = model.step(state, None if (t == 0 and isinstance(model, TransformerG2P)) else prev)
        logits[:, PAD] = float("-inf")
        prev = logits.argmax(-1)
        for b in range(src.shape[0]):
            if not done[b] and prev[b] != EOS:
                out[b].append(int(prev[b]))
        done |= prev == EOS
        if done.all():
            break
    return out


def torch_module(name):
    """The PyTorch module of bundled model ``name`` (or of a G2P model directory this training wrote)
    with its stored weights (needs torch)."""
    import torch
    from safetensors.numpy import load_file

    from seqjit.g2p.predictor import model_dir
    from seqjit.g2p.vocab import Vocab

    directory = model_dir(name)
    vocab = Vocab.load(directory)
    # the constructor keywords the model was trained with (sizes, dropout), as train.py records them
    model_args = vocab.info.get("training", {}).get("recipe", {}).get("model_args", {})
    arch = vocab.info.get("training", {}).get("arch", name)
    module = ARCHITECTURES[arch](vocab.src_size, vocab.tgt_size, **model_args).eval()
    sd = load_file(str(directory / "model.safetensors"))
    module.load_state_dict({k: torch.from_numpy(v) for k, v in _torch_names(arch, sd, module).items()})
    return module, vocab


def _torch_names(name, sd, module) -> dict:
    """seqjit's stored names -> the module's (the importer renamed the RNNs and split q/k/v)."""
    want = module.state_dict()
    if name != "transformer":
        # the importer drops Bahdanau's Va bias (it shifts every score equally): any value, e.g. 0
        return {k: sd[k.replace(".gru.", ".rnn.")] if k != "decoder.attention.Va.bias" else np.zeros(1, np.float32)
                for k in want}

    out = {"src_embed.weight": sd["encoder.embed_tokens.weight"], "tgt_embed.weight": sd["decoder.embed_tokens.weight"],
           "generator.weight": sd["lm_head.weight"], "generator.bias": sd["final_logits_bias"].reshape(-1)}
    norms = {"encoder": {"norm1": "self_attn_layer_norm", "norm2": "final_layer_norm"},
             "decoder": {"norm1": "self_attn_layer_norm", "norm2": "encoder_attn_layer_norm", "norm3": "final_layer_norm"}}
    for k in want:
        if not k.startswith("transformer."):
            continue
        parts = k.split(".")
        side = parts[1]
        if parts[2] == "norm":
            out[k] = sd[f"{side}.layer_norm.{parts[3]}"]
            continue
        i, sub = parts[3], parts[4]
        base = f"{side}.layers.{i}"
        attn = {"self_attn": "self_attn", "multihead_attn": "encoder_attn"}.get(sub)
        if attn and parts[5] == "in_proj_weight":
            out[k] = np.concatenate([sd[f"{base}.{attn}.{p}_proj.weight"] for p in "qkv"])
        elif attn and parts[5] == "in_proj_bias":
            out[k] = np.concatenate([sd[f"{base}.{attn}.{p}_proj.bias"] for p in "qkv"])
        elif attn:
            out[k] = sd[f"{base}.{attn}.out_proj.{parts[6]}"]
        elif sub in ("linear1", "linear2"):
            out[k] = sd[f"{base}.{'fc1' if sub == 'linear1' else 'fc2'}.{parts[5]}"]
        else:
            out[k] = sd[f"{base}.{norms[side][sub]}.{parts[5]}"]
    return out


def torch_runner(name: str):
    """A function: words -> greedy phoneme ids of bundled model ``name`` as its PyTorch module."""
    module, vocab = torch_module(name)

    def run(words):
        ids = [vocab.encode_word(w)[0] for w in words]
        src = torch.zeros((len(ids), max(map(len, ids))), dtype=torch.long)
        for i, row in enumerate(ids):
            src[i, : len(row)] = torch.tensor(row)
        lengths = torch.tensor([len(r) for r in ids])
        return greedy(module, src, lengths, 2 * int(lengths.max()) + 4)

    return run
