"""Transformer logits against a PyTorch nn.Transformer model with the same seeded weights.

Teacher forcing through the full-sequence decoder graph and step by step through the decoder-step
graph (KV cache), batches with different source lengths, pre- and post-norm, relu and gelu.
"""
import math

import numpy as np
import pytest

import torch  # noqa: E402  (test extra)
nn = torch.nn

import seqjit  # noqa: E402

TOL = 1e-4
pytestmark = [pytest.mark.filterwarnings("ignore:.*nested tensor:UserWarning"),
              pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")]


def sinusoid(length, dim, layout):
    """Independent sinusoidal table: interleaved (sin at even, cos at odd) or halves (sin | cos)."""
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, dtype=torch.float64)
    if layout == "interleaved":
        table[:, 0::2], table[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    else:
        table = torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)
    return table  # float64; cast to the model's dtype where used


class TorchSeq2Seq(nn.Module):
    """nn.Transformer with token embeddings, positions and a generator (the from_torch layout)."""

    def __init__(self, vs=37, vt=41, d=32, nhead=4, enc=2, dec=2, ffn=48, activation="relu", norm_first=False,
                 positions="sinusoidal", layout="interleaved", max_pos=32, scale_embedding=False, shared=False,
                 tie=False, gen_bias=True, embed_norm=False):
        super().__init__()
        self.d, self.positions, self.shared, self.tie = d, positions, shared, tie
        self.scale = math.sqrt(d) if scale_embedding else 1.0
        if shared:
            self.embed = nn.Embedding(vs, d)
        else:
            self.src_embed, self.tgt_embed = nn.Embedding(vs, d), nn.Embedding(vt, d)
        if positions == "learned":
            self.src_pos_embed, self.tgt_pos_embed = nn.Embedding(max_pos, d), nn.Embedding(max_pos, d)
        else:
            self.pe = sinusoid(max_pos, d, layout)  # a plain attribute: .double() must not round it
        self.embed_norm = embed_norm
        if embed_norm:
            self.src_embed_norm, self.tgt_embed_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.transformer = nn.Transformer(d, nhead, enc, dec, ffn, dropout=0.0, activation=activation,
                                          batch_first=True, norm_first=norm_first)
        if tie:
            self.generator = nn.Module()
            self.generator.bias = nn.Parameter(torch.zeros(vt))
        else:
            self.generator = nn.Linear(d, vt, bias=gen_bias)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "norm" in name or name.endswith("bias"):
                    p.add_(torch.randn_like(p) * 0.2)

    def _embed(self, ids, side):
        table = self.embed if self.shared else getattr(self, f"{side}_embed")
        x = table(ids) * self.scale
        positions = torch.arange(ids.shape[1])
        x = x + (getattr(self, f"{side}_pos_embed")(positions) if self.positions == "learned"
                 else self.pe[positions].to(x.dtype))
        return getattr(self, f"{side}_embed_norm")(x) if self.embed_norm else x

    def encode(self, src, lengths):
        pad = torch.arange(src.shape[1])[None, :] >= lengths[:, None]
        return self.transformer.encoder(self._embed(src, "src"), src_key_padding_mask=pad), pad

    def forward(self, src, tgt, lengths):
        memory, pad = self.encode(src, lengths)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        h = self.transformer.decoder(self._embed(tgt, "tgt"), memory, tgt_mask=causal, tgt_is_causal=True,
                                     memory_key_padding_mask=pad)
        if self.tie:
            table = self.embed if self.shared else self.tgt_embed
            return torch.nn.functional.linear(h, table.weight, self.generator.bias)
        return self.generator(h)


CASES = {
    "post-relu": dict(activation="relu", norm_first=False),
    "post-gelu-learned-shared-tied": dict(activation="gelu", norm_first=False, positions="learned", shared=True,
                                          vs=41, tie=True, scale_embedding=True),
    "pre-relu-halves-embednorm": dict(activation="relu", norm_first=True, layout="halves", embed_norm=True,
                                      scale_embedding=True, gen_bias=False),
    "pre-gelu-tied": dict(activation="gelu", norm_first=True, tie=True),
}


def _inputs(vs, vt, batch=3, src_len=7, tgt_len=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, vs, (batch, src_len), generator=g)
    tgt = torch.randint(0, vt, (batch, tgt_len), generator=g)
    lengths = torch.tensor([src_len, 3, 5][:batch])
    return src, tgt, lengths


def _build(case):
    torch.manual_seed(list(CASES).index(case))
    kwargs = CASES[case]
    ref = TorchSeq2Seq(**kwargs).eval()
    config = dict(nhead=4, activation=kwargs["activation"], norm_first=kwargs["norm_first"],
                  scale_embedding=kwargs.get("scale_embedding", False), positions=kwargs.get("positions", "sinusoidal"),
                  position_layout=kwargs.get("layout", "interleaved"), max_positions=32)
    model = seqjit.from_torch(ref.state_dict(), arch="transformer", **config)
    return ref, model


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_torch_teacher_forced_and_step_by_step(case):
    ref, model = _build(case)
    vs = ref.embed.num_embeddings if ref.shared else ref.src_embed.num_embeddings
    vt = model.config.tgt_vocab_size
    src, tgt, lengths = _inputs(vs, vt)
    with torch.no_grad():
        want = ref(src, tgt, lengths).numpy()
        memory = ref.encode(src, lengths)[0].numpy()
    src_np, tgt_np, len_np = src.numpy(), tgt.numpy(), lengths.numpy()
    got_memory = model.encode(src_np, len_np)["memory"]
    for b, n in enumerate(len_np):
        np.testing.assert_allclose(got_memory[b, :n], memory[b, :n], atol=TOL, rtol=0)
    full = model.logits(src_np, tgt_np, len_np)
    assert full.shape == want.shape and full.dtype == np.float32
    np.testing.assert_allclose(full, want, atol=TOL, rtol=0)
    stepwise = model.logits_stepwise(src_np, tgt_np, len_np)
    np.testing.assert_allclose(stepwise, want, atol=TOL, rtol=0)


def test_decoder_step_state_attention_and_beam_reorder():
    ref, model = _build("pre-gelu-tied")
    src, tgt, lengths = _inputs(37, 41)
    with torch.no_grad():
        want = ref(src, tgt, lengths).numpy()
    state = model.start(src.numpy(), lengths.numpy(), max_length=8)
    logits, attn = model.step(state, tgt[:, 0].numpy(), with_attention=True)
    np.testing.assert_allclose(logits, want[:, 0], atol=TOL, rtol=0)
    assert attn.shape == (3, 2, 4, 7)  # [B, layers, heads, S]
    np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-5)
    assert np.all(attn[1, :, :, 3:] == 0)  # padding (length 3) gets no attention
    # beam reorder: row order reversed, then continue decoding: each row follows its source
    order = np.array([2, 1, 0])
    state.reorder(order)
    for t in range(1, 4):
        logits = model.step(state, tgt[order, t].numpy())
        np.testing.assert_allclose(logits, want[order, t], atol=TOL, rtol=0)
    # expand to two beams per source
    state.reorder(np.repeat(np.arange(3), 2))
    logits = model.step(state, np.repeat(tgt[order, 4].numpy(), 2))
    np.testing.assert_allclose(logits, np.repeat(want[order, 4], 2, axis=0), atol=TOL, rtol=0)
    assert state.step == 5
    with pytest.raises(ValueError, match="prev_tokens must be an integer array of shape \\[6\\]"):
        model.step(state, tgt[:, 0].numpy())


def test_decoder_step_plan_is_made_once_per_batch_and_max_length():
    _, model = _build("post-relu")
    src, tgt, lengths = _inputs(37, 41)
    before = len(model.executor("decoder_step")._plans)  # the loader's prepare() made one, for one row
    state = model.start(src.numpy(), lengths.numpy(), max_length=6)
    for t in range(6):
        model.step(state, tgt[:, t].numpy())
    assert len(model.executor("decoder_step")._plans) == before + 1
    with pytest.raises(ValueError, match="decoder state is full"):
        model.step(state, tgt[:, 0].numpy())


def test_input_errors_are_clear():
    _, model = _build("post-relu")
    with pytest.raises(TypeError, match="src_ids must hold integer token ids"):
        model.encode(np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match=r"src_lengths must lie in \[0, 3\]"):
        model.encode(np.zeros((1, 3), np.int64), np.array([4]))
    with pytest.raises(ValueError, match="exceeds the model's 32 positions"):
        model.encode(np.zeros((1, 40), np.int64))
    with pytest.raises(ValueError, match="same batch size"):
        model.logits(np.zeros((2, 3), np.int64), np.zeros((1, 3), np.int64))


def test_float64_model_matches_torch_double():
    torch.manual_seed(7)
    ref = TorchSeq2Seq(activation="gelu", norm_first=True).double().eval()
    model = seqjit.from_torch(ref.state_dict(), nhead=4, activation="gelu", norm_first=True, max_positions=32,
                              dtype="float64")
    src, tgt, lengths = _inputs(37, 41)
    with torch.no_grad():
        want = ref(src, tgt, lengths).numpy()
    got = model.logits(src.numpy(), tgt.numpy(), lengths.numpy())
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, atol=1e-9, rtol=0)
    np.testing.assert_allclose(model.logits_stepwise(src.numpy(), tgt.numpy(), lengths.numpy()), want, atol=1e-9, rtol=0)


def test_from_torch_accepts_numpy_arrays_and_copies_tensors():
    ref, model = _build("post-relu")
    numpy_sd = {k: v.numpy().copy() for k, v in ref.state_dict().items()}
    again = seqjit.from_torch(numpy_sd, nhead=4, max_positions=32)
    src, tgt, lengths = (t.numpy() for t in _inputs(37, 41))
    want = model.logits(src, tgt, lengths)
    with torch.no_grad():
        for p in ref.parameters():
            p.zero_()  # the seqjit model holds its own copy
    np.testing.assert_array_equal(again.logits(src, tgt, lengths), want)
    np.testing.assert_array_equal(model.logits(src, tgt, lengths), want)
    with pytest.raises(seqjit.ConfigError, match="pass nhead="):
        seqjit.from_torch(numpy_sd)
    with pytest.raises(seqjit.ConfigError, match="d_model=16 contradict"):
        seqjit.from_torch(numpy_sd, nhead=4, d_model=16)
