"""seqjit against CTranslate2 on the Hugging Face families at their base dimensions (random weights).

    python benchmarks/decoding/hf_families.py --family bart --engine seqjit --threads 2
    python benchmarks/decoding/hf_families.py --all          # every family x engine x threads, one process each

Models: bart-base (d_model 768, 6+6 layers, vocab 50265), m2m100_418M (1024, 12+12, vocab 128112) and
t5-base (768, 12+12, d_ff 3072, vocab 32128) shapes, built by ``transformers`` from a config with its default init (seeded), saved with
``save_pretrained`` under ``$SEQJIT_BENCH_CACHE`` (default /tmp/seqjit-bench-hf) and converted to
CTranslate2 float32 by its own converter from the same directory (a stub tokenizer names token i
"t{i}"). Forced tokens are off and every engine decodes exactly NEW_TOKENS tokens per source
(minimum = maximum length), so the engines do the same work; sources are SRC_LEN random ids.
Prints one line per (search, batch): the median of ROUNDS timed runs in generated tokens per second.

    python benchmarks/decoding/hf_families.py --family t5 --engine seqjit --cpu-time --beams 1 --batches 1

``--cpu-time``: one thread, tokens per CPU-second of the process (the best of 5 runs), a figure that
a loaded machine disturbs far less than wall time (other tenants take turns on the cores; the work
a token costs stays).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

NEW_TOKENS, SRC_LEN, ROUNDS = 20, 20, 3
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
    """``run(sources, beam) -> ids`` for one engine."""
    root = prepare(family)
    vocab = FAMILIES[family][2]["vocab_size"]
    if name == "seqjit":
        import seqjit

        seqjit.set_num_threads(threads)
        model = seqjit.from_hf(root / "hf")
        return lambda srcs, beam: [r.ids[0] for r in model.generate(
            srcs, beam_size=beam, max_length=NEW_TOKENS, min_length=NEW_TOKENS, max_batch_size=len(srcs))]
    import ctranslate2

    names = _names(family, vocab)
    index = {n: i for i, n in enumerate(names)}
    tr = ctranslate2.Translator(str(root / "ct2"), device="cpu", compute_type="float32", intra_threads=threads,
                                inter_threads=1)

    def run(srcs, beam):
        out = tr.translate_batch([[names[t] for t in s] for s in srcs], beam_size=beam, max_batch_size=len(srcs),
                                 min_decoding_length=NEW_TOKENS, max_decoding_length=NEW_TOKENS)
        return [[index[t] for t in r.hypotheses[0]] for r in out]
    return run


def measure(family: str, name: str, threads: int, beams=(1, 4), batches=(1, 16), cpu_time: bool = False) -> dict:
    run = engine(family, name, 1 if cpu_time else threads)
    vocab = FAMILIES[family][2]["vocab_size"]
    eos = SPECIAL[family][2]
    rng = np.random.default_rng(0)
    results = {}
    for beam in beams:
        for batch in batches:
            srcs = [rng.integers(4, vocab - 1, SRC_LEN - 1).tolist() + [eos] for _ in range(batch)]
            run(srcs, beam)  # warm-up (plans, caches)
            times = []
            for _ in range(5 if cpu_time else ROUNDS):
                start = time.process_time() if cpu_time else time.perf_counter()
                run(srcs, beam)
                times.append((time.process_time() if cpu_time else time.perf_counter()) - start)
            taken = min(times) if cpu_time else float(np.median(times))
            results[f"beam {beam}, batch {batch}" + (" (tok per CPU-s, 1 thread)" if cpu_time else "")] = \
                batch * NEW_TOKENS / taken
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", choices=sorted(FAMILIES))
    parser.add_argument("--engine", choices=("seqjit", "ctranslate2"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--families", default="bart,m2m_100,t5")
    parser.add_argument("--threads-list", default="1,2", help="with --all: the thread counts tried")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--cpu-time", action="store_true", help="one thread, tokens per CPU-second (see the docstring)")
    args = parser.parse_args()
    beams = [int(b) for b in args.beams.split(",")]
    if not args.all:
        batches = [int(b) for b in args.batches.split(",")]
        print(json.dumps(measure(args.family, args.engine, args.threads, beams, batches, args.cpu_time)))
        return
    counts = [int(t) for t in args.threads_list.split(",")]
    print(f"load at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"({os.cpu_count()} CPUs)", flush=True)
    for family in args.families.split(","):
        prepare(family)
        table = {}
        for name in ("seqjit", "ctranslate2"):
            for threads in counts:
                out = subprocess.run([sys.executable, __file__, "--family", family, "--engine", name, "--threads",
                                      str(threads), "--beams", args.beams], check=True, capture_output=True,
                                     text=True).stdout
                table[(name, threads)] = json.loads(out.strip().splitlines()[-1])
        print(f"\n{SHAPES[family]} shapes (tokens/s, median of {ROUNDS}; best of {counts} threads; load "
              f"{os.getloadavg()[0]:.2f})")
        for case in table[("seqjit", counts[0])]:
            best = {n: max(table[(n, t)][case] for t in counts) for n in ("seqjit", "ctranslate2")}
            print(f"  {case:<16} seqjit {best['seqjit']:8.1f}  ctranslate2 {best['ctranslate2']:8.1f}  "
                  f"ratio {best['seqjit'] / best['ctranslate2']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
