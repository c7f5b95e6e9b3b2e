"""Decoding the RNN architectures against a small beam search written here over PyTorch modules.

The reference search is plain per-source Python over the PyTorch modules (no vectorisation, no
batching), following the documented rule (the ``transformers`` one): each step keeps the 2K best
continuations by accumulated log-probability; of those, ones that end (end token or max length)
and rank in the first K become finished hypotheses scored sum / length ** length_penalty; the best K
that do not end keep running; a source stops once no running beam can beat its worst finished one.
"""
import numpy as np
import pytest
import torch

from seqjit.convert import from_torch

nn, F = torch.nn, torch.nn.functional
VS, VT, PAD, SOS, EOS = 17, 19, 0, 1, 2


class Luong(nn.Module):
    """GRU encoder-decoder; with ``attend`` a Luong dot decoder (h~ = tanh(W_c [c; h]))."""

    def __init__(self, hidden=12, attend=True):
        super().__init__()
        self.attend = attend
        self.encoder = nn.ModuleDict(dict(embedding=nn.Embedding(VS, hidden), gru=nn.GRU(hidden, hidden, batch_first=True)))
        dec = dict(embedding=nn.Embedding(VT, hidden), gru=nn.GRU(hidden, hidden, batch_first=True), out=nn.Linear(hidden, VT))
        if attend:
            dec["concat"] = nn.Linear(2 * hidden, hidden)
        self.decoder = nn.ModuleDict(dec)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0, 0.8)  # large weights: well separated scores, so rounding never flips a choice

    def encode(self, src):
        memory, h = self.encoder.gru(self.encoder.embedding(torch.tensor([src])))
        return memory, h

    def step(self, token, h, memory):
        """log-probabilities [VT] of the next token, and the new state."""
        out, h = self.decoder.gru(self.decoder.embedding(torch.tensor([[token]])), h)
        if self.attend:
            w = F.softmax(out @ memory.transpose(1, 2), dim=-1)
            out = torch.tanh(self.decoder.concat(torch.cat([w @ memory, out], dim=2)))
        return F.log_softmax(self.decoder.out(out)[0, 0], dim=-1), h


def reference_beam(ref, src, K, max_len, lp):
    memory, h = ref.encode(src)
    running = [(0.0, [], h)]  # (score, tokens, state)
    finished = []  # (score, tokens)
    for t in range(max_len):
        cands = []
        for score, tokens, state in running:
            logp, new_state = ref.step(tokens[-1] if tokens else SOS, state, memory)
            logp[PAD] = -float("inf")
            for tok in range(VT):
                cands.append((score + float(logp[tok]), tokens + [tok], new_state))
        cands.sort(key=lambda c: -c[0])
        cands = cands[:2 * K]
        ends = [c[1][-1] == EOS or t + 1 >= max_len for c in cands]
        for rank, (c, end) in enumerate(zip(cands, ends)):
            if end and rank < K:
                finished.append((c[0] / (t + 1) ** lp, c[1]))
        finished = sorted(finished, key=lambda f: -f[0])[:K]
        running = [c for c, end in zip(cands, ends) if not end][:K]
        if t + 1 >= max_len or not running:
            break
        best_running = running[0][0] / (t + 1) ** lp
        if len(finished) == K and best_running <= finished[-1][0]:
            break
    return [(tokens[:-1] if tokens[-1] == EOS else tokens, score) for score, tokens in finished]


def reference_greedy(ref, src, max_len):
    memory, h = ref.encode(src)
    tokens, total = [], 0.0
    for _ in range(max_len):
        logp, h = ref.step(tokens[-1] if tokens else SOS, h, memory)
        logp[PAD] = -float("inf")
        logp = F.log_softmax(logp, dim=-1)
        tok = int(torch.argmax(logp))
        total += float(logp[tok])
        if tok == EOS:
            break
        tokens.append(tok)
    return tokens, total


def sources(n=8, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VS, size=int(rng.integers(1, 9))).tolist() for _ in range(n)]


@pytest.mark.parametrize("attend", [False, True], ids=["rnn_seq2seq", "attention_seq2seq-dot"])
def test_greedy_and_beam_match_reference_search(attend):
    torch.manual_seed(3)
    ref = Luong(attend=attend).eval()
    arch = "attention_seq2seq" if attend else "rnn_seq2seq"
    extra = dict(attention="dot") if attend else {}
    model = from_torch({k: v.numpy() for k, v in ref.state_dict().items()}, arch=arch,
                       pad_id=PAD, decoder_start_id=SOS, eos_id=EOS, **extra)
    srcs = sources()
    with torch.no_grad():
        greedy = [reference_greedy(ref, s, 9) for s in srcs]
        for lp in (1.0, 0.5):
            beams = [reference_beam(ref, s, 3, 9, lp) for s in srcs]
            ours = model.generate(srcs, beam_size=3, num_hypotheses=3, max_length=9, length_penalty=lp, return_scores=True)
            for res, ref_hyps in zip(ours, beams):
                assert res.ids == [tokens for tokens, _ in ref_hyps]
                np.testing.assert_allclose(res.scores, [score for _, score in ref_hyps], atol=1e-4)
    ours = model.generate(srcs, max_length=9, return_scores=True)
    for res, (tokens, score) in zip(ours, greedy):
        assert res.ids == [tokens]
        assert res.scores[0] == pytest.approx(score, abs=1e-4)


def test_attention_rows_per_step_for_attention_model():
    torch.manual_seed(4)
    ref = Luong(attend=True).eval()
    model = from_torch({k: v.numpy() for k, v in ref.state_dict().items()}, arch="attention_seq2seq",
                       attention="dot", pad_id=PAD, decoder_start_id=SOS, eos_id=EOS)
    srcs = sources(4, seed=1)
    for beam in (1, 2):
        for src, res in zip(srcs, model.generate(srcs, beam_size=beam, max_length=6, return_attention=True)):
            att = res.attention[0]
            # the source axis spans this source, as when decoded alone (issue 25), not the batch's padding
            assert att.shape == (min(len(res.ids[0]) + 1, 6), len(src))
            np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-5)
