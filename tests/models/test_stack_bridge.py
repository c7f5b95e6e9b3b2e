"""``bridge="stack"``: a bidirectional encoder's final states start one decoder layer each, unchanged
(IndicXlit: a one-layer bidirectional encoder, a two-layer decoder, decoder layer 0 from the forward
final state and layer 1 from the backward one, no bridge weights). The reference is a PyTorch module
written here that does exactly that, ``h0 = enc_h.view(L * D, B, H)``, run on each source alone;
seqjit runs the padded batch (Python and native replay): teacher-forced logits and greedy ids."""
import numpy as np
import pytest
import torch

from seqjit.convert import from_torch
from seqjit.errors import ConfigError

nn = torch.nn
VS, VT, PAD, START, EOS, H = 12, 14, 0, 1, 2, 6
SOURCES = [[3, 4, 5, 6, 7, 8], [9, 10], [11, 3, 5, 4]]


class Stacked(nn.Module):
    def __init__(self, cell, layers):
        super().__init__()
        rnn = getattr(nn, cell.upper())
        self.cell, self.layers = cell, layers
        self.encoder = nn.Module()
        self.encoder.embedding = nn.Embedding(VS, 5)
        self.encoder.rnn = rnn(5, H, layers, batch_first=True, bidirectional=True)
        self.decoder = nn.Module()
        self.decoder.embedding = nn.Embedding(VT, 4)
        self.decoder.rnn = rnn(4, H, 2 * layers, batch_first=True)
        self.decoder.out = nn.Linear(H, VT)

    def start(self, src):
        _, state = self.encoder.rnn(self.encoder.embedding(src))
        if self.cell == "gru":
            return state.view(2 * self.layers, src.shape[0], H)
        enc_h, enc_c = state
        return enc_h.view(2 * self.layers, src.shape[0], H), enc_c.view(2 * self.layers, src.shape[0], H)

    def step(self, token, state):
        y, state = self.decoder.rnn(self.decoder.embedding(token), state)
        return self.decoder.out(y)[0, 0], state

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


@pytest.mark.parametrize("replay", ["python", "native"])
@pytest.mark.parametrize("cell,layers", [("lstm", 1), ("gru", 1), ("lstm", 2)])
def test_stacked_final_states_match_pytorch(cell, layers, replay):
    torch.manual_seed(5)
    ref = Stacked(cell, layers).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.mul_(2.0)
    model = from_torch(ref.state_dict(), arch="rnn_seq2seq", pad_id=PAD, decoder_start_id=START, eos_id=EOS)
    assert model.config.bridge == "stack" and model.config.dec_layers == 2 * layers  # read from the weights
    model.set_replay(replay)
    tgt = np.array([[START, 5, 6, 7], [START, 8, 3, 9], [START, 4, 4, 10]])
    src = np.full((3, 6), PAD)
    for b, s in enumerate(SOURCES):
        src[b, :len(s)] = s
    lengths = np.array([len(s) for s in SOURCES])
    got = model.logits(src, tgt, lengths)
    for b, s in enumerate(SOURCES):
        want = ref.teacher_forced(torch.tensor([s]), torch.tensor(tgt[b:b + 1]))
        np.testing.assert_allclose(got[b], want, atol=1e-4, rtol=0)
    want_ids = [ref.greedy(torch.tensor([s]), 8) for s in SOURCES]
    assert [r.ids[0] for r in model.generate(SOURCES, max_length=8)] == want_ids
    assert any(len(ids) > 1 for ids in want_ids)


def test_stack_needs_a_decoder_layer_per_final_state():
    torch.manual_seed(5)
    ref = Stacked("lstm", 1)
    with pytest.raises(ConfigError, match="bridge 'stack' .* decoder_layers must be 2, got 1"):
        from_torch({k: v for k, v in ref.state_dict().items() if "_l1" not in k}, arch="rnn_seq2seq", bridge="stack")
