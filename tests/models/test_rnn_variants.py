"""``rnn_seq2seq`` (no attention) with the fields it shares with ``attention_seq2seq``: one-value
bridges (masked mean of the encoder outputs, top layer's [fwd; bwd] through a linear, top forward
state, zeros), a decoder with its own layer count and width, and MLP / maxout output layers.

The reference is a plain-PyTorch encoder-decoder written here, run on each source alone (no
padding); seqjit runs the padded batch (a mean over padded positions would show), under the Python
and the native replay: teacher-forced logits and greedy ids.
"""
import numpy as np
import pytest
import torch

from seqjit.convert import from_torch

nn = torch.nn
TOL = 1e-4
VS, VT, PAD, START, EOS = 11, 13, 0, 1, 2
LENGTHS = [6, 2, 4]


class Plain(nn.Module):
    """Encoder (bidirectional) -> one initial value for every decoder layer -> decoder -> output."""

    def __init__(self, cell, bridge, dec_layers, dec_hidden, output, hidden=6, layers=2, out_hidden=5):
        super().__init__()
        self.cell, self.bridge_kind, self.output, self.layers, self.H = cell, bridge, output, layers, hidden
        self.dec_layers, self.Hd = dec_layers, dec_hidden
        rnn = getattr(nn, cell.upper())
        self.encoder = nn.Module()
        self.encoder.embedding = nn.Embedding(VS, 5)
        self.encoder.rnn = rnn(5, hidden, layers, batch_first=True, bidirectional=True)
        if bridge in ("mean", "top_linear"):
            self.bridge = nn.Linear(2 * hidden, dec_hidden)
        self.decoder = nn.Module()
        self.decoder.embedding = nn.Embedding(VT, 4)
        self.decoder.rnn = rnn(4, dec_hidden, dec_layers, batch_first=True)
        width = dec_hidden
        if output == "mlp":
            self.decoder.out_hidden, width = nn.Linear(dec_hidden, out_hidden), out_hidden
        elif output == "maxout":
            self.decoder.maxout, width = nn.Linear(dec_hidden, 2 * out_hidden), out_hidden
        self.decoder.out = nn.Linear(width, VT)

    def start(self, src):
        memory, state = self.encoder.rnn(self.encoder.embedding(src))
        h_n = state if self.cell == "gru" else state[0]
        top = h_n.view(self.layers, 2, 1, self.H)[-1]
        if self.bridge_kind == "mean":
            s = torch.tanh(self.bridge(memory.mean(dim=1)))
        elif self.bridge_kind == "top_linear":
            s = torch.tanh(self.bridge(torch.cat([top[0], top[1]], dim=-1)))
        elif self.bridge_kind == "last":
            s = top[0]
        else:
            s = memory.new_zeros(1, self.Hd)
        h0 = s.unsqueeze(0).repeat(self.dec_layers, 1, 1)
        return h0 if self.cell == "gru" else (h0, h0)  # LSTM: c0 = h0 (bridge_cell "hidden")

    def step(self, token, state):
        d = self.decoder
        h, state = d.rnn(d.embedding(token), state)
        if self.output == "mlp":
            h = torch.tanh(d.out_hidden(h))
        elif self.output == "maxout":
            y = d.maxout(h)
            h = y.view(*y.shape[:-1], -1, 2).max(dim=-1).values
        return d.out(h)[0, 0], state

    @torch.no_grad()
    def teacher_forced(self, src, tgt):
        state, rows = self.start(src), []
        for t in range(tgt.shape[1]):
            y, state = self.step(tgt[:, t:t + 1], state)
            rows.append(y)
        return torch.stack(rows).numpy()

    @torch.no_grad()
    def greedy(self, src, max_length):
        state, token, ids = self.start(src), START, []
        for _ in range(max_length):
            y, state = self.step(torch.tensor([[token]]), state)
            y[PAD] = -float("inf")
            token = int(y.argmax())
            if token == EOS:
                break
            ids.append(token)
        return ids


CASES = {
    "gru-mean-2to1-maxout": ("gru", "mean", 1, 9, "maxout"),
    "lstm-top_linear-2to3-mlp": ("lstm", "top_linear", 3, 7, "mlp"),
    "gru-last-2to1": ("gru", "last", 1, 6, "linear"),
    "lstm-zeros-mlp": ("lstm", "zeros", 2, 8, "mlp"),
}


@pytest.mark.parametrize("replay", ["python", "native"])
@pytest.mark.parametrize("name", list(CASES))
def test_rnn_seq2seq_variant_matches_pytorch(name, replay):
    cell, bridge, dec_layers, dec_hidden, output = CASES[name]
    torch.manual_seed(4)
    ref = Plain(cell, bridge, dec_layers, dec_hidden, output).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.mul_(2.0)
    kw = dict(bridge=bridge, pad_id=PAD, decoder_start_id=START, eos_id=EOS)
    if bridge in ("mean", "top_linear"):
        kw["bridge_activation"] = "tanh"
    if cell == "lstm" and bridge != "zeros":
        kw["bridge_cell"] = "hidden"
    model = from_torch(ref.state_dict(), arch="rnn_seq2seq", **kw)
    model.set_replay(replay)
    assert (model.config.decoder_layers or model.config.num_layers) == dec_layers
    assert model.has_full_decoder() == (bridge != "zeros")
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, VS, (3, 6), generator=g)
    for b, n in enumerate(LENGTHS):
        src[b, n:] = PAD
    tgt = torch.randint(3, VT, (3, 5), generator=g)
    got = model.logits(src.numpy(), tgt.numpy(), np.array(LENGTHS))
    stepwise = model.logits_stepwise(src.numpy(), tgt.numpy(), np.array(LENGTHS))
    for b, n in enumerate(LENGTHS):
        want = ref.teacher_forced(src[b:b + 1, :n], tgt[b:b + 1])
        assert np.abs(got[b] - want).max() <= TOL
        assert np.abs(stepwise[b] - want).max() <= TOL
    sources = [list(map(int, src[b, :n])) for b, n in enumerate(LENGTHS)]
    assert [r.ids[0] for r in model.generate(sources, max_length=8)] == [ref.greedy(torch.tensor([s]), 8) for s in sources]
