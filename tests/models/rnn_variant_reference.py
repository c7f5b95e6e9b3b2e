"""An attention RNN encoder-decoder in plain PyTorch with every variant the ``attention_seq2seq``
config composes, written from the papers and toolkits (not from seqjit), with seqjit's canonical
weight names so ``from_torch`` reads its ``state_dict``.

It runs one source at a time with no padding (no masks), so a padded seqjit batch checks the
masking rules against it:

- bridges: ``mean`` (Nematus ``init_state = tanh(W mean(ctx) + b)``), ``top_linear`` (JoeyNMT
  ``init_hidden: bridge``), ``last`` (JoeyNMT ``init_hidden: last``: the top layer's forward state),
  ``zeros``; an LSTM's c0 is h0 (JoeyNMT) or zeros;
- attention after the step on the new top state (JoeyNMT, OpenNMT-py): ``bahdanau`` (additive),
  ``dot``, ``general``; the attentional layer ``act(W_c [context; h])`` (OpenNMT-py's order) or
  ``[h; context]`` (JoeyNMT's), of width ``att_dim``, tanh or none; Luong input feeding;
- attention before the step on the previous state, its context fed into the RNN input with the
  embedding (Bahdanau et al. 2015, Nematus): ``query="previous"``;
- Luong et al.'s ``concat`` score ``v . tanh(W [q; m])``; the query from the top layer, or the sum or
  concatenation of every decoder layer's state (``query_layers``);
- output: linear, MLP (Linear, activation, Linear), maxout (pairs of units), read from the top
  state / attentional vector alone or, ``deep=True``, from [that; context; embedding of the previous
  token] (Bahdanau et al. 2015 appendix A's deep output, on the new state as in the main text and
  Nematus).
"""
import torch

nn, F = torch.nn, torch.nn.functional


def _rnn(cell, *args, **kw):
    return getattr(nn, cell.upper())(*args, batch_first=True, **kw)


class VariantSeq2Seq(nn.Module):
    def __init__(self, vs, vt, *, cell="gru", emb=5, hidden=6, layers=1, bidirectional=True, dec_layers=None,
                 dec_hidden=None, bridge="mean", bridge_tanh=True, bridge_cell="hidden", score="bahdanau",
                 attn_dim=None, feeding=False, att_dim=None, att_tanh=True, hidden_first=False, concat_bias=True,
                 output="linear", out_hidden=None, out_act="tanh", slope=0.01, query="current", query_layers="top",
                 deep=False):
        super().__init__()
        D = 2 if bidirectional else 1
        M, Hd = D * hidden, dec_hidden or hidden
        self.cell, self.layers, self.D, self.H, self.Hd = cell, layers, D, hidden, Hd
        self.dec_layers, self.bridge_kind = dec_layers or layers, bridge
        self.bridge_tanh, self.bridge_cell = bridge_tanh, bridge_cell
        self.score, self.feeding, self.att_tanh, self.hidden_first = score, feeding, att_tanh, hidden_first
        self.output, self.out_act, self.slope = output, out_act, slope
        self.query, self.query_layers, self.deep = query, query_layers, deep
        Qd = Hd * (self.dec_layers if query_layers == "concat" else 1)
        Ao = att_dim or Hd
        self.Ao = Ao
        self.encoder = nn.Module()
        self.encoder.embedding = nn.Embedding(vs, emb)
        self.encoder.rnn = _rnn(cell, emb, hidden, layers, bidirectional=bidirectional)
        if bridge in ("mean", "top_linear"):
            self.bridge = nn.Linear(M, Hd)  # mean: over the memory (M = D*H here); top_linear: [fwd; bwd]
        self.decoder = nn.Module()
        d = self.decoder
        d.embedding = nn.Embedding(vt, emb + 1)
        rnn_in = emb + 1 + (M if query == "previous" else (Ao if feeding else 0))
        d.rnn = _rnn(cell, rnn_in, Hd, self.dec_layers)
        d.attention = nn.Module()
        A = attn_dim or Hd
        if score == "bahdanau":
            d.attention.Wa, d.attention.Ua, d.attention.Va = nn.Linear(Qd, A), nn.Linear(M, A), nn.Linear(A, 1)
        elif score == "concat":
            d.attention.W, d.attention.v = nn.Linear(Qd + M, A, bias=False), nn.Linear(A, 1, bias=False)
        elif score == "general":
            d.attention.Wa = nn.Linear(M, Qd, bias=False)
        width = Hd
        if query == "current":
            d.concat, width = nn.Linear(M + Hd, Ao, bias=concat_bias), Ao
        if deep:
            width += M + emb + 1
        if output == "mlp":
            d.out_hidden, width = nn.Linear(width, out_hidden), out_hidden
        elif output == "maxout":
            d.maxout, width = nn.Linear(width, 2 * out_hidden), out_hidden
        d.out = nn.Linear(width, vt)

    def initial_state(self, memory, h_n):
        """One source: memory [1, n, M], h_n [L*D, 1, H] -> the decoder's (h0, c0) [Ld, 1, Hd]."""
        top = h_n.view(self.layers, self.D, 1, self.H)[-1]  # [D, 1, H]
        kind = self.bridge_kind
        if kind == "zeros":
            s = memory.new_zeros(1, self.Hd)
        elif kind == "last":
            s = top[0]
        else:
            x = memory.mean(dim=1) if kind == "mean" else torch.cat(list(top), dim=-1)
            s = self.bridge(x)
            s = torch.tanh(s) if self.bridge_tanh else s
        h0 = s.unsqueeze(0).repeat(self.dec_layers, 1, 1)
        c0 = h0 if self.bridge_cell == "hidden" and kind != "zeros" else torch.zeros_like(h0)
        return h0 if self.cell == "gru" else (h0, c0)

    def query_of(self, state):
        """The decoder state ([Ld, 1, Hd] or an LSTM's (h, c)) -> the attention query [1, 1, Qd]."""
        h = state if self.cell == "gru" else state[0]
        if self.query_layers == "sum":
            return h.sum(dim=0, keepdim=True)
        if self.query_layers == "concat":
            return torch.cat(list(h), dim=-1).unsqueeze(0)
        return h[-1:]

    def attend(self, q, memory):
        """q [1, 1, Qd], memory [1, n, M] -> context [1, 1, M], weights [1, 1, n]."""
        a = self.decoder.attention
        if self.score == "bahdanau":
            scores = a.Va(torch.tanh(a.Wa(q) + a.Ua(memory))).transpose(1, 2)
        elif self.score == "concat":
            pairs = torch.cat([q.expand(-1, memory.shape[1], -1), memory], dim=-1)  # [q; m_j] per position
            scores = a.v(torch.tanh(a.W(pairs))).transpose(1, 2)
        else:
            keys = memory if self.score == "dot" else a.Wa(memory)
            scores = q @ keys.transpose(1, 2)
        weights = F.softmax(scores, dim=-1)
        return weights @ memory, weights

    def readout(self, x):
        d = self.decoder
        if self.output == "mlp":
            y = d.out_hidden(x)
            if self.out_act == "leaky_relu":
                x = F.leaky_relu(y, self.slope)
            else:
                x = getattr(F, self.out_act)(y) if self.out_act != "tanh" else torch.tanh(y)
        elif self.output == "maxout":
            y = d.maxout(x)
            x = y.view(*y.shape[:-1], -1, 2).max(dim=-1).values
        return d.out(x)

    def start(self, src):
        """One source [1, n] -> (memory, decoder state, previous attentional vector)."""
        memory, state = self.encoder.rnn(self.encoder.embedding(src))
        h_n = state if self.cell == "gru" else state[0]
        return memory, self.initial_state(memory, h_n), memory.new_zeros(1, 1, self.Ao)

    def step(self, token, memory, state, feed):
        """token [1, 1] -> (logits [V], weights [n], state, feed)."""
        d = self.decoder
        e = d.embedding(token)
        if self.query == "previous":  # Bahdanau: attend with the previous state, the context into the RNN
            context, weights = self.attend(self.query_of(state), memory)
            h, state = d.rnn(torch.cat([e, context], dim=-1), state)
            out = h
        else:
            x = torch.cat([e, feed], dim=-1) if self.feeding else e
            h, state = d.rnn(x, state)
            context, weights = self.attend(self.query_of(state), memory)
            parts = [h, context] if self.hidden_first else [context, h]
            out = feed = d.concat(torch.cat(parts, dim=-1))
            out = feed = torch.tanh(out) if self.att_tanh else out
        if self.deep:
            out = torch.cat([out, context, e], dim=-1)
        return self.readout(out)[0, 0], weights[0, 0], state, feed

    @torch.no_grad()
    def teacher_forced(self, src, tgt_in):
        """One source [1, n], targets [1, T] -> logits [T, V], weights [T, n]."""
        memory, state, feed = self.start(src)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            y, w, state, feed = self.step(tgt_in[:, t:t + 1], memory, state, feed)
            logits.append(y)
            weights.append(w)
        return torch.stack(logits), torch.stack(weights)

    @torch.no_grad()
    def greedy(self, src, start_id, eos_id, banned, max_length, min_length=0):
        """Greedy ids for one source (``banned`` token ids never chosen, nor eos before
        ``min_length`` tokens), eos not included."""
        memory, state, feed = self.start(src)
        token, ids = start_id, []
        for step in range(max_length):
            y, _, state, feed = self.step(torch.tensor([[token]]), memory, state, feed)
            y[list(banned) + ([eos_id] if step < min_length else [])] = -float("inf")
            token = int(y.argmax())
            if token == eos_id:
                break
            ids.append(token)
        return ids
