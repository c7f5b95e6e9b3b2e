"""Attention RNN Seq2Seq against PyTorch modules written here with the same seeded weights.

References: the PyTorch tutorial's EncoderRNN + AttnDecoderRNN + BahdanauAttention ("NLP From
Scratch: Translation with a Sequence to Sequence Network and Attention"), a generalised Bahdanau
decoder (LSTM, 2 layers, bidirectional encoder), and Luong decoders (dot and general scores,
attentional state tanh(W_c [c; h])). The references have no padding mask, so each source runs alone;
seqjit runs the padded batch. Logits (teacher-forced and step by step) and the attention weights of
every step must match; save/load round trip; weight errors.
"""
import numpy as np
import pytest

import torch  # noqa: E402  (test extra)
nn, F = torch.nn, torch.nn.functional

import seqjit  # noqa: E402
from seqjit.convert import from_torch  # noqa: E402
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


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(decoder_input, decoder_hidden, encoder_outputs)
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
        return output, hidden, attn_weights


class Tutorial(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.encoder, self.decoder = EncoderRNN(VS, hidden), AttnDecoderRNN(hidden, VT)


# -- general encoder and decoders ------------------------------------------------------------------
def rnn(cell, *args, **kw):
    return getattr(nn, cell.upper())(*args, batch_first=True, **kw)


class Encoder(nn.Module):
    def __init__(self, cell, emb, hidden, layers, bidirectional):
        super().__init__()
        self.embedding = nn.Embedding(VS, emb)
        self.rnn = rnn(cell, emb, hidden, layers, bidirectional=bidirectional)


class Bahdanau(nn.Module):
    def __init__(self, query, key, dim):
        super().__init__()
        self.Wa, self.Ua, self.Va = nn.Linear(query, dim), nn.Linear(key, dim), nn.Linear(dim, 1)

    def forward(self, query, keys):  # [1, 1, Hd], [1, n, M]
        weights = F.softmax(self.Va(torch.tanh(self.Wa(query) + self.Ua(keys))).squeeze(2).unsqueeze(1), dim=-1)
        return torch.bmm(weights, keys), weights


class Luong(nn.Module):
    def __init__(self, score, hidden, key, bias):
        super().__init__()
        self.score = score
        if score == "general":
            self.Wa = nn.Linear(key, hidden, bias=bias)

    def forward(self, h, memory):  # [1, 1, Hd], [1, n, M]
        keys = memory if self.score == "dot" else self.Wa(memory)
        weights = F.softmax(torch.bmm(h, keys.transpose(1, 2)), dim=-1)
        return torch.bmm(weights, memory), weights


class Decoder(nn.Module):
    def __init__(self, kind, cell, emb, hidden, memory, layers, attn_dim=None, attn_bias=False, concat_bias=True):
        super().__init__()
        self.kind = kind
        self.embedding = nn.Embedding(VT, emb)
        if kind == "bahdanau":
            self.attention = Bahdanau(hidden, memory, attn_dim or hidden)
            self.rnn = rnn(cell, emb + memory, hidden, layers)
        else:
            self.attention = Luong(kind, hidden, memory, attn_bias)
            self.rnn = rnn(cell, emb, hidden, layers)
            self.concat = nn.Linear(memory + hidden, hidden, bias=concat_bias)
        self.out = nn.Linear(hidden, VT)


class AttnSeq2Seq(nn.Module):
    def __init__(self, kind, cell="gru", emb=5, hidden=6, layers=1, bidirectional=False, bridge="sum", memory="concat",
                 hidden_first=False, **decoder_kw):
        super().__init__()
        self.cell, self.layers, self.bi, self.bridge_kind, self.memory_kind = cell, layers, bidirectional, bridge, memory
        self.hidden_first = hidden_first
        self.encoder = Encoder(cell, emb, hidden, layers, bidirectional)
        dec_hidden = 2 * hidden if bidirectional and bridge == "concat" else hidden
        mem = 2 * hidden if bidirectional and memory == "concat" else hidden
        if bidirectional and bridge == "linear":
            self.bridge = nn.Linear(2 * hidden, hidden)
            if cell == "lstm":
                self.bridge_c = nn.Linear(2 * hidden, hidden)
        self.decoder = Decoder(kind, cell, emb + 2, dec_hidden, mem, layers, **decoder_kw)

    def combine(self, s, linear):
        if not self.bi:
            return s
        s = s.view(self.layers, 2, s.shape[1], s.shape[2])
        if self.bridge_kind == "sum":
            return s[:, 0] + s[:, 1]
        both = torch.cat([s[:, 0], s[:, 1]], dim=-1)
        return both if self.bridge_kind == "concat" else linear(both)

    def run(self, src, tgt_in):
        """One source alone: src [1, n], tgt_in [1, T] -> logits [T, V], weights [T, n]."""
        memory, state = self.encoder.rnn(self.encoder.embedding(src))
        if self.bi and self.memory_kind == "sum":
            memory = memory[..., :memory.shape[-1] // 2] + memory[..., memory.shape[-1] // 2:]
        if self.cell == "gru":
            state = self.combine(state, getattr(self, "bridge", None))
        else:
            state = (self.combine(state[0], getattr(self, "bridge", None)),
                     self.combine(state[1], getattr(self, "bridge_c", None)))
        d, logits, weights = self.decoder, [], []
        for t in range(tgt_in.shape[1]):
            emb = d.embedding(tgt_in[:, t:t + 1])
            if d.kind == "bahdanau":
                top = (state if self.cell == "gru" else state[0])[-1:].permute(1, 0, 2)  # previous top hidden
                context, w = d.attention(top, memory)
                out, state = d.rnn(torch.cat((emb, context), dim=2), state)
                y = d.out(out)
            else:
                h, state = d.rnn(emb, state)
                context, w = d.attention(h, memory)
                parts = (h, context) if self.hidden_first else (context, h)
                y = d.out(torch.tanh(d.concat(torch.cat(parts, dim=2))))
            logits.append(y[0, 0])
            weights.append(w[0, 0])
        return torch.stack(logits), torch.stack(weights)


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, VS, (B, S), generator=g)
    for b, n in enumerate(LENGTHS):
        src[b, n:] = 0
    return src, torch.tensor(LENGTHS), torch.randint(0, VT, (B, T), generator=g)


def max_err(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


def check(model, src, lengths, tgt_in, expected_logits, expected_weights):
    """Teacher-forced and stepwise logits, and each step's attention weights, against the reference
    (``expected_*[b]``: row b run alone, [T, V] and [T, n_b])."""
    ids, lens = src.numpy(), lengths.numpy()
    full, stepwise = model.logits(ids, tgt_in, lens), model.logits_stepwise(ids, tgt_in, lens)
    state = model.start(ids, lens, max_length=T)
    for t in range(T):
        logits, weights = model.step(state, tgt_in[:, t], with_attention=True)
        assert weights.shape == (B, S)
        for b, n in enumerate(LENGTHS):
            assert max_err(logits[b], expected_logits[b][t]) <= TOL
            assert max_err(weights[b, :n], expected_weights[b][t]) <= TOL
            assert not weights[b, n:].any()
    for b in range(B):
        assert max_err(full[b], expected_logits[b]) <= TOL
        assert max_err(stepwise[b], expected_logits[b]) <= TOL


def test_tutorial_attn_decoder_rnn(tmp_path):
    torch.manual_seed(2)
    ref = Tutorial(hidden=8).eval()
    src, lengths, target = batch(3)
    model = from_torch(ref.state_dict(), arch="attention_seq2seq", output_log_softmax=True, decoder_start_id=SOS_token)
    assert model.config.attention == "bahdanau"
    tgt_in = np.concatenate([np.full((B, 1), SOS_token), target.numpy()[:, :-1]], axis=1)
    logits, weights = [], []
    for b, n in enumerate(LENGTHS):
        with torch.no_grad():
            out, hidden = ref.encoder(src[b:b + 1, :n])
            log_probs, _, attentions = ref.decoder(out, hidden, target[b:b + 1])
        logits.append(log_probs[0].numpy())
        weights.append(attentions[0].numpy())
    check(model, src, lengths, tgt_in, logits, weights)
    model.save(tmp_path / "m")
    loaded = seqjit.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.logits(src.numpy(), tgt_in, lengths.numpy()),
                                  model.logits(src.numpy(), tgt_in, lengths.numpy()))


VARIANTS = {
    "bahdanau-lstm-2-bi-linear": dict(kind="bahdanau", cell="lstm", layers=2, bidirectional=True, bridge="linear",
                                      attn_dim=7),
    "bahdanau-gru-1-bi-sum": dict(kind="bahdanau", cell="gru", bidirectional=True, memory="sum"),
    "dot-gru-1": dict(kind="dot"),
    "dot-lstm-2": dict(kind="dot", cell="lstm", layers=2),
    "dot-gru-2-bi-concat": dict(kind="dot", layers=2, bidirectional=True, bridge="concat"),
    "general-gru-1": dict(kind="general"),
    "general-lstm-2-bias-nobias": dict(kind="general", cell="lstm", layers=2, attn_bias=True, concat_bias=False),
    "general-gru-2-bi-sum-hidden-first": dict(kind="general", layers=2, bidirectional=True, memory="sum",
                                              hidden_first=True),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variants_match_pytorch(name, tmp_path):
    kw = VARIANTS[name]
    torch.manual_seed(7)
    ref = AttnSeq2Seq(**kw).eval()
    src, lengths, tgt = batch()
    extra = {"concat_order": "hidden_first"} if kw.get("hidden_first") else {}
    model = from_torch(ref.state_dict(), arch="attention_seq2seq", **extra)
    assert model.config.attention == kw["kind"]
    logits, weights = [], []
    for b, n in enumerate(LENGTHS):
        with torch.no_grad():
            y, w = ref.run(src[b:b + 1, :n], tgt[b:b + 1])
        logits.append(y.numpy())
        weights.append(w.numpy())
    check(model, src, lengths, tgt.numpy(), logits, weights)
    if name in ("general-lstm-2-bias-nobias", "bahdanau-lstm-2-bi-linear"):
        model.save(tmp_path / "m")
        loaded = seqjit.load(tmp_path / "m")
        assert loaded.config == model.config
        np.testing.assert_array_equal(loaded.logits(src.numpy(), tgt.numpy(), lengths.numpy()),
                                      model.logits(src.numpy(), tgt.numpy(), lengths.numpy()))


def test_weight_errors_name_the_weight():
    torch.manual_seed(5)
    sd = {k: v.numpy() for k, v in Tutorial(hidden=6).state_dict().items()}
    bad = dict(sd, **{"decoder.attention.Va.weight": np.zeros((1, 5), np.float32)})
    with pytest.raises(ModelFormatError, match=r"decoder\.attention\.Va\.weight has shape \[1, 5\], expected \[1, 6\]"):
        from_torch(bad, arch="attention_seq2seq")
    missing = {k: v for k, v in sd.items() if k != "decoder.attention.Wa.bias"}
    with pytest.raises(ModelFormatError, match=r"missing weight.*decoder\.attention\.Wa\.bias"):
        from_torch(missing, arch="attention_seq2seq")
    gru_input = dict(sd, **{"decoder.gru.weight_ih_l0": np.zeros((18, 6), np.float32)})
    with pytest.raises(ModelFormatError, match=r"decoder\.rnn\.weight_ih_l0 has shape \[18, 6\], expected \[18, 12\]"):
        from_torch(gru_input, arch="attention_seq2seq")
    with pytest.raises(seqjit.ConfigError, match="attention"):
        from_torch(sd, arch="attention_seq2seq", attention="dot")
    torch.manual_seed(6)
    luong = {k: v.numpy() for k, v in AttnSeq2Seq("general").state_dict().items()}
    del luong["decoder.concat.weight"]
    with pytest.raises(ModelFormatError, match=r"decoder\.concat\.weight"):
        from_torch(luong, arch="attention_seq2seq")
