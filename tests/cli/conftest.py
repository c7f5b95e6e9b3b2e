"""Shared helpers for the CLI tests: tiny seeded models (no download) and a ``cli`` runner."""
import io
import sys

import numpy as np
import pytest

import torch
import transformers  # noqa: F401  (test extra)

VOCAB, PAD, EOS = 96, 95, 0  # as in tests/decoding/conftest.py


@pytest.fixture(scope="session")
def marian(tmp_path_factory, make_tiny_marian):
    """``(hf_model, hf_dir, seqjit_dir)``: a tiny MarianMT saved the Hugging Face way, and as seqjit."""
    import seqjit

    hf = make_tiny_marian(max_position_embeddings=64)
    hf_dir = tmp_path_factory.mktemp("hf_marian")
    hf.save_pretrained(hf_dir, safe_serialization=True)
    sj_dir = tmp_path_factory.mktemp("sj_marian")
    seqjit.from_hf(hf_dir).save(sj_dir)
    return hf, hf_dir, sj_dir


def hf_greedy(marian_generate, hf, sources, max_new_tokens):
    """transformers' greedy MarianMTModel.generate on ``sources``; ids without start, end and padding."""
    out = marian_generate(hf, sources, num_beams=1, max_new_tokens=max_new_tokens)
    results = []
    for seq in out[:, 1:].tolist():
        results.append(seq[:seq.index(EOS)] if EOS in seq else [t for t in seq if t != PAD])
    return results


class GRUSeq2Seq(torch.nn.Module):
    """A plain GRU encoder-decoder with the names seqjit's rnn_seq2seq importer reads."""

    def __init__(self, src_vocab=11, tgt_vocab=13, emb=6, hidden=8, layers=1):
        super().__init__()
        nn = torch.nn
        self.encoder = nn.Module()
        self.encoder.embedding = nn.Embedding(src_vocab, emb)
        self.encoder.gru = nn.GRU(emb, hidden, layers, batch_first=True)
        self.decoder = nn.Module()
        self.decoder.embedding = nn.Embedding(tgt_vocab, emb)
        self.decoder.gru = nn.GRU(emb, hidden, layers, batch_first=True)
        self.decoder.out = nn.Linear(hidden, tgt_vocab)

    def forward(self, src, lengths, tgt_in):
        """Teacher-forced logits [B, T, Vt]; the decoder starts from the encoder's final state."""
        packed = torch.nn.utils.rnn.pack_padded_sequence(self.encoder.embedding(src), lengths, batch_first=True,
                                                         enforce_sorted=False)
        _, state = self.encoder.gru(packed)
        out, _ = self.decoder.gru(self.decoder.embedding(tgt_in), state)
        return self.decoder.out(out)


def gru_seq2seq(seed: int = 0, **sizes):
    torch.manual_seed(seed)
    return GRUSeq2Seq(**sizes).eval()


def random_sources(n: int, seed: int = 1, low: int = 1, high: int = 14):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, PAD, size=int(rng.integers(low, high))).tolist() for _ in range(n)]


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(*argv, stdin=bytes)`` -> (exit status, stdout, stderr) of ``seqjit.cli.main``."""
    from seqjit.cli import main

    def call(*argv, stdin: bytes | None = None):
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def write_lines(path, rows) -> None:
    path.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def helpers(marian_generate):
    """The module's helper functions, for test files (conftest is not importable by name)."""
    import functools
    import types

    return types.SimpleNamespace(gru_seq2seq=gru_seq2seq, hf_greedy=functools.partial(hf_greedy, marian_generate),
                                 random_sources=random_sources,
                                 write_lines=write_lines, VOCAB=VOCAB, PAD=PAD, EOS=EOS)
