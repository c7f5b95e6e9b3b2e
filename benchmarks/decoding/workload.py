"""The decoding benchmark's workload: models, sources and one greedy ``run(sources)`` per engine.

Marian (opus-mt-en-de sized, seeded random weights, default init std 0.02) is saved once as a
Hugging Face directory under ``$SEQJIT_BENCH_CACHE`` (default /tmp/seqjit-bench-decoding) and
converted to CTranslate2 float32 there. The CTranslate2 converter wants a tokenizer: a stub gives it
the vocabulary "<pad>"-free names (id i -> "t{i}", 0 "</s>", 1 "<unk>", 58100 "<pad>", which the
Marian loader drops: pad is never generated, as in transformers with bad_words_ids=[[pad]]).
The RNN models (GRU 2x512, tutorial Bahdanau 512) are built from a torch seed in every process.
Every engine generates exactly NEW_TOKENS tokens per source (minimum = maximum length), greedily
or by beam search (Marian engines: ``run(sources, beam)``).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

THREADS = int(os.environ.get("SEQJIT_BENCH_THREADS", "2"))  # engines threads (run.py: 2)
NEW_TOKENS = 20
SRC_LEN = 20
VOCAB, PAD, EOS, UNK = 58101, 58100, 0, 1
MARIAN = dict(vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
              decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512,
              activation_function="swish", scale_embedding=True,
              share_encoder_decoder_embeddings=True, pad_token_id=PAD, eos_token_id=EOS,
              decoder_start_token_id=PAD, forced_eos_token_id=None)
RNN_VOCAB, RNN_HIDDEN = 32000, 512          # RNN models: vocabulary (both sides) and hidden size
RNN_PAD, RNN_SOS, RNN_EOS = 0, 1, 2         # seqjit's RNNConfig defaults (pad, decoder start, end)


def cache_dir() -> Path:
    return Path(os.environ.get("SEQJIT_BENCH_CACHE", "/tmp/seqjit-bench-decoding"))


def set_threads() -> None:
    import seqjit  # first: it sets OMP_WAIT_POLICY=PASSIVE before torch loads the OpenMP runtime
    import torch

    torch.set_num_threads(THREADS)
    seqjit.set_num_threads(THREADS)


def sources(batch: int, vocab: int = VOCAB, eos: int = EOS, seed: int = 0) -> list:
    """``batch`` sources of SRC_LEN ids: SRC_LEN - 1 random tokens (no special ids) then the end token."""
    rng = np.random.default_rng(seed)
    body = rng.integers(3, vocab - 1, size=(batch, SRC_LEN - 1))
    return [row.tolist() + [eos] for row in body]


# -- Marian: build, save, convert -------------------------------------------------------------------
def prepare_marian() -> Path:
    """The cache directory holding ``hf/`` (config.json + model.safetensors) and ``ct2/`` (fp32)."""
    root = cache_dir()
    hf_dir, ct2_dir = root / "hf", root / "ct2"
    if not (hf_dir / "model.safetensors").exists():
        import torch
        from transformers import MarianConfig, MarianMTModel

        torch.manual_seed(0)
        model = MarianMTModel(MarianConfig(**MARIAN)).eval()
        with torch.no_grad():
            model.model.shared.weight[PAD].zero_()  # Marian starts decoding from the pad row: zeros
        model.save_pretrained(hf_dir)
    if not (ct2_dir / "model.bin").exists():
        _ct2_converter()(str(hf_dir)).convert(str(ct2_dir), quantization="float32", force=True)
    return root


class _StubTokenizer:
    """What ctranslate2's MarianMTLoader reads from a tokenizer: the vocabulary and special tokens."""

    eos_token, unk_token, pad_token, bos_token = "</s>", "<unk>", "<pad>", None
    special_tokens_map: dict = {}

    def get_vocab(self) -> dict:
        names = {EOS: self.eos_token, UNK: self.unk_token, PAD: self.pad_token}
        return {names.get(i, f"t{i}"): i for i in range(VOCAB)}


def _ct2_converter():
    from ctranslate2.converters import TransformersConverter

    class StubTokenizerConverter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return _StubTokenizer()

    return StubTokenizerConverter


def token_names(ids) -> list:
    names = {EOS: "</s>", UNK: "<unk>", PAD: "<pad>"}
    return [names.get(i, f"t{i}") for i in ids]


def token_ids(names) -> list:
    special = {"</s>": EOS, "<unk>": UNK, "<pad>": PAD}
    return [special[n] if n in special else int(n[1:]) for n in names]


# -- engines: engine(name) -> (run(sources, beam=1) -> list of id lists) -----------------------------
def marian_engine(name: str):
    root = prepare_marian()
    if name == "seqjit":
        import seqjit

        model = seqjit.convert.from_hf(root / "hf")
        return lambda srcs, beam=1: [r.ids[0] for r in model.generate(
            srcs, max_length=NEW_TOKENS, min_length=NEW_TOKENS, beam_size=beam, max_batch_size=len(srcs))]
    if name == "ctranslate2":
        import ctranslate2

        tr = ctranslate2.Translator(str(root / "ct2"), device="cpu", compute_type="float32",
                                    intra_threads=THREADS, inter_threads=1)

        def run(srcs, beam=1):
            out = tr.translate_batch([token_names(s) for s in srcs], beam_size=beam, max_batch_size=len(srcs),
                                     min_decoding_length=NEW_TOKENS, max_decoding_length=NEW_TOKENS)
            return [token_ids(r.hypotheses[0]) for r in out]
        return run
    if name == "transformers":
        import torch
        from transformers import MarianMTModel

        model = MarianMTModel.from_pretrained(root / "hf", dtype=torch.float32).eval()

        def run(srcs, beam=1):
            with torch.inference_mode():
                out = model.generate(input_ids=torch.tensor(srcs), attention_mask=torch.ones(len(srcs), SRC_LEN, dtype=torch.long),
                                     do_sample=False, num_beams=beam, min_new_tokens=NEW_TOKENS, max_new_tokens=NEW_TOKENS,
                                     bad_words_ids=[[PAD]], forced_eos_token_id=None)
            return out[:, 1:].tolist()
        return run
    raise ValueError(f"unknown Marian engine {name!r} (ONNX Runtime: benchmarks/harness/engines.py)")


# -- RNN models: PyTorch modules (layouts of tests/models/test_*seq2seq.py) and greedy loops ----------
def rnn_modules(kind: str):
    """Seeded PyTorch modules: ``gru`` (nn.GRU 2x512 encoder-decoder, state dict names for
    ``rnn_seq2seq``) or ``bahdanau`` (the tutorial's EncoderRNN + AttnDecoderRNN, hidden 512)."""
    import torch
    from torch import nn

    torch.manual_seed(1 if kind == "gru" else 2)
    H, V = RNN_HIDDEN, RNN_VOCAB
    root = nn.Module()
    root.encoder, root.decoder = nn.Module(), nn.Module()
    root.encoder.embedding, root.decoder.embedding = nn.Embedding(V, H), nn.Embedding(V, H)
    if kind == "gru":
        root.encoder.gru = nn.GRU(H, H, 2, batch_first=True)
        root.decoder.gru = nn.GRU(H, H, 2, batch_first=True)
    elif kind == "bahdanau":
        root.encoder.gru = nn.GRU(H, H, batch_first=True)
        att = root.decoder.attention = nn.Module()
        att.Wa, att.Ua, att.Va = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, 1)
        root.decoder.gru = nn.GRU(2 * H, H, batch_first=True)
    else:
        raise ValueError(f"unknown RNN kind {kind!r}")
    root.decoder.out = nn.Linear(H, V)
    return root.eval()


def torch_rnn_greedy(root, kind: str):
    """A batched greedy loop over the modules (end and pad tokens blocked, as min length = max)."""
    import torch

    dec = root.decoder

    def run(srcs):
        with torch.inference_mode():
            src = torch.tensor(srcs)
            memory, hidden = root.encoder.gru(root.encoder.embedding(src))
            keys = dec.attention.Ua(memory) if kind == "bahdanau" else None
            token = torch.full((src.shape[0], 1), RNN_SOS, dtype=torch.long)
            out = []
            for _ in range(NEW_TOKENS):
                x = dec.embedding(token)                                   # [B, 1, H]
                if kind == "bahdanau":
                    a = dec.attention
                    scores = a.Va(torch.tanh(a.Wa(hidden.permute(1, 0, 2)) + keys)).squeeze(2).unsqueeze(1)
                    context = torch.bmm(torch.softmax(scores, dim=-1), memory)
                    x = torch.cat((x, context), dim=2)
                y, hidden = dec.gru(x, hidden)
                logits = dec.out(y[:, 0])
                logits[:, [RNN_PAD, RNN_EOS]] = float("-inf")
                token = logits.argmax(-1, keepdim=True)
                out.append(token)
            return torch.cat(out, dim=1).tolist()
    return run


def rnn_engine(name: str, kind: str):
    root = rnn_modules(kind)
    if name == "torch":
        return torch_rnn_greedy(root, kind)
    if name == "seqjit":
        import seqjit

        arch = "rnn_seq2seq" if kind == "gru" else "attention_seq2seq"
        model = seqjit.convert.from_torch(root.state_dict(), arch=arch, pad_id=RNN_PAD, eos_id=RNN_EOS,
                                          decoder_start_id=RNN_SOS)
        return lambda srcs: [r.ids[0] for r in model.generate(
            srcs, max_length=NEW_TOKENS, min_length=NEW_TOKENS, beam_size=1, max_batch_size=len(srcs))]
    raise ValueError(f"unknown RNN engine {name!r}")


def cpu_name() -> str:
    """The CPU's model name as lscpu gives it (the benchmarks name the host they ran on)."""
    import subprocess

    lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Model name")), "CPU ?")
