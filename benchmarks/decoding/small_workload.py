"""Small-model decoding workloads (issue 11): a tiny Transformer and a G2P-sized GRU seq2seq.

- Tiny Transformer: a seeded ``MarianConfig`` (d_model 128, 4 heads, 2 + 2 layers, FFN 256,
  vocabulary 100: eos 0, unk 1, pad 99 = decoder start), 10-token sources, exactly 10 generated
  tokens, greedy. Engines: seqjit, CTranslate2 (float32, converted once), transformers.
  ``tiny-sample``: the same, the tokens drawn by top-k sampling (k = ``TINY_TOPK``).
- GRU seq2seq: embedding 256, one GRU layer of 256 on each side, vocabularies 29 (letters) and 74
  (phonemes), seeded PyTorch modules; words of 4-12 letters; exactly 8 generated tokens, greedy.
  Engines: seqjit, a plain NumPy loop over the same weights (``x @ W.T`` per step), PyTorch.

``engine(model, name, threads)`` returns ``run(batch) -> list of id lists``; every engine of a
model generates the same number of tokens per source. Models are cached under
``$SEQJIT_BENCH_CACHE`` (default /tmp/seqjit-bench-small).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

TINY = dict(vocab_size=100, d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, max_position_embeddings=256,
            pad_token_id=99, eos_token_id=0, decoder_start_token_id=99, forced_eos_token_id=None,
            scale_embedding=True, share_encoder_decoder_embeddings=True)
TINY_SRC, TINY_NEW = 10, 10
TINY_TOPK = 10  # the top-k of the sampling workload
GRU_SRC_VOCAB, GRU_TGT_VOCAB, GRU_EMBED, GRU_HIDDEN, GRU_NEW = 29, 74, 256, 256, 8
PAD, SOS, EOS = 0, 1, 2  # the GRU model's special ids (seqjit's RNNConfig defaults)


def cache_dir() -> Path:
    return Path(os.environ.get("SEQJIT_BENCH_CACHE", "/tmp/seqjit-bench-small"))


def tiny_sources(batch: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [rng.integers(2, 99, TINY_SRC - 1).tolist() + [0] for _ in range(batch)]


def words(batch: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, GRU_SRC_VOCAB, int(n)).tolist() for n in rng.integers(4, 13, batch)]


# -- tiny Transformer ---------------------------------------------------------------------------------
def prepare_tiny() -> Path:
    root = cache_dir() / "tiny"
    hf, ct2 = root / "hf", root / "ct2"
    if not (hf / "model.safetensors").exists():
        import torch
        from transformers import MarianConfig, MarianMTModel

        torch.manual_seed(0)
        model = MarianMTModel(MarianConfig(**TINY)).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "embed_positions" not in name and "layer_norm" not in name:
                    p.normal_(0, 0.2)  # far-apart logits: every engine picks the same tokens
        model.save_pretrained(hf)
    if not (ct2 / "model.bin").exists():
        from ctranslate2.converters import TransformersConverter

        class Stub(TransformersConverter):
            def load_tokenizer(self, *args, **kwargs):
                return _StubTokenizer()

        Stub(str(hf)).convert(str(ct2), quantization="float32", force=True)
    return root


class _StubTokenizer:
    eos_token, unk_token, pad_token, bos_token = "</s>", "<unk>", "<pad>", None
    special_tokens_map: dict = {}

    def get_vocab(self) -> dict:
        names = {0: "</s>", 1: "<unk>", 99: "<pad>"}
        return {names.get(i, f"t{i}"): i for i in range(100)}


def _names(ids):
    return ["</s>" if i == 0 else f"t{i}" for i in ids]


def _ids(names):
    return [0 if n == "</s>" else 1 if n == "<unk>" else int(n[1:]) for n in names]


def tiny_engine(name: str, threads: int, topk: int = 1):
    """``topk`` 1: greedy; else top-k sampling (seeded where the engine takes a seed per call)."""
    root = prepare_tiny()
    if name == "seqjit":
        import seqjit

        seqjit.set_num_threads(threads)
        model = seqjit.from_hf(root / "hf")
        sampling = dict(sampling_topk=topk, seed=0) if topk != 1 else {}
        return lambda srcs: [r.ids[0] for r in model.generate(srcs, max_length=TINY_NEW, min_length=TINY_NEW,
                                                               max_batch_size=len(srcs), **sampling)]
    if name == "ctranslate2":
        import ctranslate2

        tr = ctranslate2.Translator(str(root / "ct2"), device="cpu", compute_type="float32", intra_threads=threads,
                                    inter_threads=1)
        return lambda srcs: [_ids(r.hypotheses[0]) for r in tr.translate_batch(
            [_names(s) for s in srcs], beam_size=1, max_batch_size=len(srcs), min_decoding_length=TINY_NEW,
            max_decoding_length=TINY_NEW, sampling_topk=topk)]
    if name == "transformers":
        import torch
        from transformers import MarianMTModel

        torch.set_num_threads(threads)
        model = MarianMTModel.from_pretrained(root / "hf").eval()

        def run(srcs):
            with torch.inference_mode():
                out = model.generate(input_ids=torch.tensor(srcs), do_sample=topk != 1, top_k=topk, num_beams=1,
                                     min_new_tokens=TINY_NEW, max_new_tokens=TINY_NEW, bad_words_ids=[[99]])
            return out[:, 1:].tolist()
        return run
    raise ValueError(f"unknown engine {name!r} for the tiny Transformer")


# -- GRU seq2seq --------------------------------------------------------------------------------------
def gru_modules():
    import torch
    from torch import nn

    torch.manual_seed(3)
    root = nn.Module()
    root.encoder, root.decoder = nn.Module(), nn.Module()
    root.encoder.embedding = nn.Embedding(GRU_SRC_VOCAB, GRU_EMBED)
    root.encoder.gru = nn.GRU(GRU_EMBED, GRU_HIDDEN, batch_first=True)
    root.decoder.embedding = nn.Embedding(GRU_TGT_VOCAB, GRU_EMBED)
    root.decoder.gru = nn.GRU(GRU_EMBED, GRU_HIDDEN, batch_first=True)
    root.decoder.out = nn.Linear(GRU_HIDDEN, GRU_TGT_VOCAB)
    return root.eval()


def gru_weights() -> dict:
    return {k: v.detach().numpy().copy() for k, v in gru_modules().state_dict().items()}


def numpy_gru_loop(w: dict):
    """The plain NumPy loop: per step ``x @ W.T`` for the gates; greedy with pad/eos blocked."""
    def cell(x, h, p):
        gi = x @ w[f"{p}.weight_ih_l0"].T + w[f"{p}.bias_ih_l0"]
        gh = h @ w[f"{p}.weight_hh_l0"].T + w[f"{p}.bias_hh_l0"]
        ir, iz, inn = np.split(gi, 3, axis=1)
        hr, hz, hn = np.split(gh, 3, axis=1)
        r, z = 1 / (1 + np.exp(-(ir + hr))), 1 / (1 + np.exp(-(iz + hz)))
        return (1 - z) * np.tanh(inn + r * hn) + z * h

    def run(srcs):
        out = []
        for start in range(0, len(srcs), 256):
            batch = srcs[start:start + 256]
            lengths = np.array([len(s) for s in batch])
            ids = np.zeros((len(batch), lengths.max()), np.int64)
            for i, s in enumerate(batch):
                ids[i, :len(s)] = s
            h = np.zeros((len(batch), GRU_HIDDEN), np.float32)
            for t in range(ids.shape[1]):
                new = cell(w["encoder.embedding.weight"][ids[:, t]], h, "encoder.gru")
                h = np.where((t < lengths)[:, None], new, h)
            tok = np.full(len(batch), SOS)
            toks = []
            for _ in range(GRU_NEW):
                h = cell(w["decoder.embedding.weight"][tok], h, "decoder.gru")
                logits = h @ w["decoder.out.weight"].T + w["decoder.out.bias"]
                logits[:, [PAD, EOS]] = -np.inf
                tok = logits.argmax(1)
                toks.append(tok)
            out += np.stack(toks, 1).tolist()
        return out
    return run


def gru_engine(name: str, threads: int):
    if name == "seqjit":
        import seqjit

        seqjit.set_num_threads(threads)
        model = seqjit.from_torch(gru_weights(), arch="rnn_seq2seq", pad_id=PAD, eos_id=EOS, decoder_start_id=SOS)
        return lambda srcs: [r.ids[0] for r in model.generate(srcs, max_length=GRU_NEW, min_length=GRU_NEW,
                                                               max_batch_size=256)]
    if name == "numpy":
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
        return numpy_gru_loop(gru_weights())
    if name == "torch":
        import torch

        torch.set_num_threads(threads)
        root = gru_modules()
        dec = root.decoder

        def run(srcs):
            out = []
            with torch.inference_mode():
                for start in range(0, len(srcs), 256):
                    batch = srcs[start:start + 256]
                    ids = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in batch], batch_first=True)
                    packed = torch.nn.utils.rnn.pack_padded_sequence(root.encoder.embedding(ids), [len(s) for s in batch],
                                                                     batch_first=True, enforce_sorted=False)
                    _, h = root.encoder.gru(packed)
                    tok = torch.full((len(batch), 1), SOS, dtype=torch.long)
                    toks = []
                    for _ in range(GRU_NEW):
                        y, h = dec.gru(dec.embedding(tok), h)
                        logits = dec.out(y[:, 0])
                        logits[:, [PAD, EOS]] = float("-inf")
                        tok = logits.argmax(-1, keepdim=True)
                        toks.append(tok)
                    out += torch.cat(toks, 1).tolist()
            return out
        return run
    raise ValueError(f"unknown engine {name!r} for the GRU seq2seq")
