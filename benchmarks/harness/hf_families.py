"""The Hugging Face families at their base dimensions, with random weights: bart-base (d_model 768, 6+6
layers, vocabulary 50265), m2m100_418M (1024, 12+12, 128112) and t5-base (768, 12+12, d_ff 3072, 32128)
shapes, built by ``transformers`` from a config with its default init (seeded), saved with
``save_pretrained`` under ``$SEQJIT_BENCH_CACHE`` (default /tmp/seqjit-bench-hf), converted to
CTranslate2 float32 by its own converter from the same directory (a stub tokenizer names token i
"t{i}") and exported to ONNX by optimum on demand (``benchmarks/decoding/export_onnx.py``).

Forced tokens are off, the pad token is never generated and every engine decodes exactly NEW_TOKENS
tokens per source, so the engines do the same work; sources are SRC_LEN random ids then the end token.
``engine(family, name, threads)`` returns ``run(sources, beam) -> list of id lists``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks.decoding import ort_seq2seq
from benchmarks.decoding import workload as w

NEW_TOKENS, SRC_LEN = w.NEW_TOKENS, w.SRC_LEN
FAMILIES = {
    "bart": ("BartConfig", "BartForConditionalGeneration",
             dict(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                  decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024,
                  forced_eos_token_id=None, normalize_before=False)),  # normalize_before: read by CTranslate2 4.x
    "m2m_100": ("M2M100Config", "M2M100ForConditionalGeneration",
                dict(vocab_size=128112, d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                     decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024)),
    "t5": ("T5Config", "T5ForConditionalGeneration",
           dict(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12, decoder_start_token_id=0)),
}
#: the real model whose dimensions each family takes (and the cache folder's name)
SHAPES = {"bart": "bart-base", "m2m_100": "m2m100_418M", "t5": "t5-base"}
SPECIAL = {"bart": (0, 1, 2, 3), "m2m_100": (0, 1, 2, 3), "t5": (None, 0, 1, 2)}  # bos, pad, eos, unk


def cache() -> Path:
    return Path(os.environ.get("SEQJIT_BENCH_CACHE", "/tmp/seqjit-bench-hf"))


def prepare(family: str) -> Path:
    import torch
    import transformers

    root = cache() / SHAPES[family]
    config_class, model_class, sizes = FAMILIES[family]
    if not (root / "hf" / "model.safetensors").exists():
        torch.manual_seed(0)
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**sizes)).eval()
        model.save_pretrained(root / "hf")
    if not (root / "ct2" / "model.bin").exists():
        _converter(family, sizes["vocab_size"])(str(root / "hf")).convert(str(root / "ct2"), quantization="float32",
                                                                           force=True)
    return root


def rule(family: str) -> ort_seq2seq.Rule:
    """The decoding rule every engine follows: start token from the saved config, pad and end blocked."""
    _, pad, eos, _ = SPECIAL[family]
    start = json.loads((cache() / SHAPES[family] / "hf" / "config.json").read_text())["decoder_start_token_id"]
    return ort_seq2seq.Rule(start=start, pad=pad, eos=eos, new_tokens=NEW_TOKENS)


def sources(family: str, batch: int) -> list:
    """``batch`` sources of SRC_LEN ids: random non-special tokens, then the end token."""
    return w.sources(batch, vocab=FAMILIES[family][2]["vocab_size"], eos=SPECIAL[family][2])


def _names(family: str, vocab: int) -> list:
    bos, pad, eos, unk = SPECIAL[family]
    special = {bos: "<s>", pad: "<pad>", eos: "</s>", unk: "<unk>"}
    return [special.get(i, f"t{i}") for i in range(vocab)]


def _converter(family: str, vocab: int):
    from ctranslate2.converters import TransformersConverter

    names = _names(family, vocab)

    class Stub:
        bos_token, pad_token, eos_token, unk_token = "<s>", "<pad>", "</s>", "<unk>"
        special_tokens_map: dict = {}
        unk_token_id = SPECIAL[family][3]

        def get_vocab(self):
            return {n: i for i, n in enumerate(names)}

        def convert_ids_to_tokens(self, i):
            return names[i]

        def __len__(self):
            return vocab

    class Converter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return Stub()

    return Converter


def engine(family: str, name: str, threads: int):
    """``run(sources, beam) -> ids`` (the generated ids, exactly NEW_TOKENS per source) for one engine."""
    root, r = prepare(family), rule(family)
    if name == "seqjit":
        import seqjit

        seqjit.set_num_threads(threads)
        model = seqjit.from_hf(root / "hf")
        return lambda srcs, beam=1: [r_.ids[0] for r_ in model.generate(
            srcs, beam_size=beam, max_length=NEW_TOKENS, min_length=NEW_TOKENS, max_batch_size=len(srcs))]
    if name == "ctranslate2":
        return _ct2_engine(family, root, threads)
    if name == "transformers":
        import torch
        import transformers

        model = getattr(transformers, FAMILIES[family][1]).from_pretrained(root / "hf", dtype=torch.float32).eval()

        def run(srcs, beam=1):
            with torch.inference_mode():
                ids = torch.tensor(srcs)
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=beam,
                                     min_new_tokens=NEW_TOKENS, max_new_tokens=NEW_TOKENS, bad_words_ids=[[r.pad]],
                                     decoder_start_token_id=r.start, forced_bos_token_id=None, forced_eos_token_id=None)
            return out[:, 1:].tolist()
        return run
    if name in ("onnxruntime", "ort-generate"):  # the optimum export, made by the parent process
        make = ort_seq2seq.numpy_engine if name == "onnxruntime" else ort_seq2seq.generate_engine
        return make(root / "onnx", threads, r)
    raise ValueError(f"unknown engine {name!r}")


def _ct2_engine(family: str, root: Path, threads: int):
    import ctranslate2

    names = _names(family, FAMILIES[family][2]["vocab_size"])
    index = {n: i for i, n in enumerate(names)}
    tr = ctranslate2.Translator(str(root / "ct2"), device="cpu", compute_type="float32", intra_threads=threads,
                                inter_threads=1)

    def run(srcs, beam=1):
        out = tr.translate_batch([[names[t] for t in s] for s in srcs], beam_size=beam, max_batch_size=len(srcs),
                                 min_decoding_length=NEW_TOKENS, max_decoding_length=NEW_TOKENS,
                                 suppress_sequences=[["<pad>"]])
        return [[index[t] for t in r.hypotheses[0]] for r in out]
    return run
