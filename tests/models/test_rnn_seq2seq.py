"""Vanilla RNN Seq2Seq against PyTorch modules written here with the same seeded weights.

References: a plain nn.GRU/nn.LSTM encoder-decoder (padded batches through pack_padded_sequence;
bidirectional final states combined by sum, concatenation or a linear bridge), and the PyTorch
tutorial's EncoderRNN + DecoderRNN ("NLP From Scratch: Translation with a Sequence to Sequence
Network and Attention"), run on each source alone. Teacher forcing through the full-sequence
decoder graph and step by step through the decoder-step graph; save/load; weight errors.
"""
import numpy as np
import pytest

import torch  # noqa: E402  (test extra)
nn, F = torch.nn, torch.nn.functional

import seqjit  # noqa: E402
from seqjit.convert import from_torch  # noqa: E402
from seqjit.convert.torch_rnn import join_state_dicts  # noqa: E402
from seqjit.errors import ModelFormatError  # noqa: E402

TOL = 1e-4
SOS_token, MAX_LENGTH = 1, 5
B, S, T, VS, VT = 3, 6, MAX_LENGTH, 11, 13
LENGTHS = [6, 2, 4]


# -- the tutorial's modules ----------------------------------------------------------------------
class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden = self.forward_step(decoder_input, decoder_hidden)
            decoder_outputs.append(decoder_output)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        return decoder_outputs, decoder_hidden, None

    def forward_step(self, input, hidden):
        output = self.embedding(input)
        output = F.relu(output)
        output, hidden = self.gru(output, hidden)
        output = self.out(output)
        return output, hidden


class Tutorial(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.encoder, self.decoder = EncoderRNN(VS, hidden), DecoderRNN(hidden, VT)


# -- a plain encoder-decoder -----------------------------------------------------------------------
class Encoder(nn.Module):
    def __init__(self, cell, emb, hidden, layers, bidirectional, attr):
        super().__init__()
        self.embedding = nn.Embedding(VS, emb)
        self.attr = attr  # the RNN's attribute name: "rnn", "gru" or "lstm"
        setattr(self, attr, getattr(nn, cell.upper())(emb, hidden, layers, batch_first=True, bidirectional=bidirectional))

    def forward(self, src, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(src), lengths, batch_first=True, enforce_sorted=False)
        out, state = getattr(self, self.attr)(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])[0], state


class Decoder(nn.Module):
    def __init__(self, cell, emb, hidden, layers, attr):
        super().__init__()
        self.embedding = nn.Embedding(VT, emb)
        self.attr = attr
        setattr(self, attr, getattr(nn, cell.upper())(emb, hidden, layers, batch_first=True))
        self.out = nn.Linear(hidden, VT)


class Plain(nn.Module):
    def __init__(self, cell="gru", emb=5, hidden=6, layers=1, bidirectional=False, bridge="sum", tanh=False, attr="rnn"):
        super().__init__()
        self.cell, self.layers, self.bi, self.bridge_kind, self.tanh = cell, layers, bidirectional, bridge, tanh
        self.encoder = Encoder(cell, emb, hidden, layers, bidirectional, attr)
        dec_hidden = 2 * hidden if bidirectional and bridge == "concat" else hidden
        if bidirectional and bridge == "linear":
            self.bridge = nn.Linear(2 * hidden, hidden)
            if cell == "lstm":
                self.bridge_c = nn.Linear(2 * hidden, hidden)
        self.decoder = Decoder(cell, emb + 1, dec_hidden, layers, attr)

    def combine(self, s, linear):
        if not self.bi:
            return s
        s = s.view(self.layers, 2, s.shape[1], s.shape[2])  # [L, fwd/bwd, B, H]
        if self.bridge_kind == "sum":
            return s[:, 0] + s[:, 1]
        both = torch.cat([s[:, 0], s[:, 1]], dim=-1)
        if self.bridge_kind == "concat":
            return both
        y = linear(both)
        return torch.tanh(y) if self.tanh else y

    def forward(self, src, lengths, tgt_in):
        _, state = self.encoder(src, lengths)
        if self.cell == "gru":
            init = self.combine(state, getattr(self, "bridge", None))
        else:
            init = (self.combine(state[0], getattr(self, "bridge", None)), self.combine(state[1], getattr(self, "bridge_c", None)))
        out, _ = getattr(self.decoder, self.decoder.attr)(self.decoder.embedding(tgt_in), init)
        return self.decoder.out(out)


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, VS, (B, S), generator=g)
    for b, n in enumerate(LENGTHS):
        src[b, n:] = 0
    return src, torch.tensor(LENGTHS), torch.randint(0, VT, (B, T), generator=g)


def max_err(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


PLAIN = {
    "gru-1": dict(cell="gru"),
    "lstm-1": dict(cell="lstm", attr="lstm"),
    "gru-2": dict(cell="gru", layers=2, attr="gru"),
    "lstm-2": dict(cell="lstm", layers=2),
    "gru-2-bi-sum": dict(cell="gru", layers=2, bidirectional=True),
    "lstm-2-bi-sum": dict(cell="lstm", layers=2, bidirectional=True),
    "gru-1-bi-concat": dict(cell="gru", bidirectional=True, bridge="concat"),
    "lstm-2-bi-linear-tanh": dict(cell="lstm", layers=2, bidirectional=True, bridge="linear", tanh=True),
    "gru-1-bi-linear": dict(cell="gru", bidirectional=True, bridge="linear"),
}


@pytest.mark.parametrize("name", list(PLAIN))
def test_plain_matches_pytorch(name, tmp_path):
    kw = PLAIN[name]
    torch.manual_seed(1)
    ref = Plain(**kw).eval()
    src, lengths, tgt = batch()
    with torch.no_grad():
        expected = ref(src, lengths, tgt).numpy()
    extra = {"bridge_activation": "tanh"} if kw.get("tanh") else {}
    model = from_torch(ref.state_dict(), arch="rnn_seq2seq", **extra)
    assert model.config.cell == kw["cell"] and model.config.num_layers == kw.get("layers", 1)
    ids, lens, tgt_ids = src.numpy(), lengths.numpy(), tgt.numpy()
    assert max_err(model.logits(ids, tgt_ids, lens), expected) <= TOL
    assert max_err(model.logits_stepwise(ids, tgt_ids, lens), expected) <= TOL
    if name == "lstm-2-bi-linear-tanh":  # save/load round trip: identical outputs
        model.save(tmp_path / "m")
        loaded = seqjit.load(tmp_path / "m")
        assert loaded.config == model.config
        np.testing.assert_array_equal(loaded.logits(ids, tgt_ids, lens), model.logits(ids, tgt_ids, lens))
        np.testing.assert_array_equal(loaded.logits_stepwise(ids, tgt_ids, lens), model.logits_stepwise(ids, tgt_ids, lens))


def test_tutorial_decoder_rnn(tmp_path):
    torch.manual_seed(2)
    ref = Tutorial(hidden=8).eval()
    src, lengths, target = batch(3)
    sd = join_state_dicts(ref.encoder.state_dict(), ref.decoder.state_dict())  # the tutorial's two modules
    model = from_torch(sd, arch="rnn_seq2seq", decoder_input_activation="relu", output_log_softmax=True,
                       decoder_start_id=SOS_token)
    tgt_in = np.concatenate([np.full((B, 1), SOS_token), target.numpy()[:, :-1]], axis=1)  # SOS, then teacher forcing
    ours = model.logits(src.numpy(), tgt_in, lengths.numpy())
    ours_step = model.logits_stepwise(src.numpy(), tgt_in, lengths.numpy())
    greedy = []
    for b, n in enumerate(LENGTHS):  # the tutorial has no padding: each source alone
        with torch.no_grad():
            enc_out, enc_hidden = ref.encoder(src[b:b + 1, :n])
            expected, _, _ = ref.decoder(enc_out, enc_hidden, target[b:b + 1])
            free, _, _ = ref.decoder(enc_out, enc_hidden)
        assert max_err(ours[b], expected[0]) <= TOL
        assert max_err(ours_step[b], expected[0]) <= TOL
        greedy.append(free[0].numpy())
    # free running: feed back the argmax, step by step
    state = model.start(src.numpy(), lengths.numpy(), max_length=T)
    tokens = np.full(B, SOS_token)
    for t in range(T):
        logits = model.step(state, tokens)
        for b in range(B):
            assert max_err(logits[b], greedy[b][t]) <= TOL
        tokens = logits.argmax(-1)
    model.save(tmp_path / "tut")
    loaded = seqjit.load(tmp_path / "tut")
    np.testing.assert_array_equal(loaded.logits(src.numpy(), tgt_in, lengths.numpy()), ours)


def test_beam_reorder_keeps_rows():
    torch.manual_seed(4)
    ref = Plain(cell="lstm", layers=2).eval()
    model = from_torch(ref.state_dict(), arch="rnn_seq2seq")
    src, lengths, tgt = batch()
    full = model.logits_stepwise(src.numpy(), tgt.numpy(), lengths.numpy())
    state = model.start(src.numpy(), lengths.numpy(), max_length=T)
    model.step(state, tgt.numpy()[:, 0])
    order = np.array([2, 0, 1])
    state.reorder(order)
    np.testing.assert_allclose(model.step(state, tgt.numpy()[order, 1]), full[order, 1], rtol=0, atol=1e-6)


def test_weight_errors_name_the_weight():
    torch.manual_seed(5)
    sd = {k: v.numpy() for k, v in Plain(cell="gru", layers=2).state_dict().items()}
    missing = dict(sd)
    del missing["decoder.rnn.bias_hh_l1"]
    with pytest.raises(ModelFormatError, match=r"decoder\.rnn\.bias_hh_l1"):
        from_torch(missing, arch="rnn_seq2seq")
    bad = dict(sd, **{"decoder.out.weight": np.zeros((VT, 7), np.float32)})
    with pytest.raises(ModelFormatError, match=r"decoder\.out\.weight has shape \[13, 7\], expected \[13, 6\]"):
        from_torch(bad, arch="rnn_seq2seq")
    extra = dict(sd, **{"decoder.attention.Wa.weight": np.zeros((6, 6), np.float32)})
    with pytest.raises(ModelFormatError, match=r"unexpected weight.*decoder\.attention\.Wa\.weight"):
        from_torch(extra, arch="rnn_seq2seq")
    no_embedding = {k: v for k, v in sd.items() if k != "encoder.embedding.weight"}
    with pytest.raises(ModelFormatError, match=r"encoder\.embedding\.weight"):
        from_torch(no_embedding, arch="rnn_seq2seq")
    with pytest.raises(seqjit.ConfigError, match="hidden_size"):
        from_torch(sd, arch="rnn_seq2seq", hidden_size=99)
    model = from_torch(sd, arch="rnn_seq2seq")
    state = model.start(np.zeros((1, 3), np.int64), max_length=2)
    with pytest.raises(ValueError, match="no attention"):
        model.step(state, np.zeros(1, np.int64), with_attention=True)
