"""The Hugging Face families at their base dimensions (random weights) against their peers: seqjit,
CTranslate2, ONNX Runtime (NumPy loop over the optimum export, and optimum's generate) and
transformers, greedy and beam 4, batch 1 and 16, each (engine, threads) in its own process.

    python benchmarks/decoding/hf_families.py --all          # every family x engine x threads, one table per family
    python benchmarks/decoding/hf_families.py --all --families t5 --engines seqjit,ctranslate2
    python benchmarks/decoding/hf_families.py --family bart --engine seqjit --threads 2   # one engine, this process

Models: bart-base (d_model 768, 6+6 layers, vocab 50265), m2m100_418M (1024, 12+12, vocab 128112) and
t5-base (768, 12+12, d_ff 3072, vocab 32128) shapes, built by ``transformers`` from a config with its
default init (seeded), saved with ``save_pretrained`` under ``$SEQJIT_BENCH_CACHE`` (default
/tmp/seqjit-bench-hf), converted to CTranslate2 float32 by its own converter from the same directory
(a stub tokenizer names token i "t{i}") and exported to ONNX by optimum from the same directory
(export_onnx.py, under the export interpreter ``--ort-python`` / ``$SEQJIT_ORT_EXPORT_PYTHON``; without
one the ONNX Runtime columns are skipped with the reason printed). Forced tokens are off, the pad
token is never generated and every engine decodes exactly NEW_TOKENS tokens per source (minimum =
maximum length), so the engines do the same work; sources are SRC_LEN random ids. ``--all`` prints,
per family, peers.py's table: tokens/s at each engine's better of 1 and 2 threads (transformers, the
reference, at 2), median of the timed calls, and every engine's ids against transformers'.

    python benchmarks/decoding/hf_families.py --family t5 --engine seqjit --cpu-time --beams 1 --batches 1

``--cpu-time``: one thread, tokens per CPU-second of the process (the best of 5 runs), a figure that
a loaded machine disturbs far less than wall time (other tenants take turns on the cores; the work
a token costs stays).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import export_onnx  # noqa: E402
import ort_seq2seq  # noqa: E402
import peers  # noqa: E402
import workload as w  # noqa: E402

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
    if name in peers.ORT:  # the optimum export, made by the driver
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


def measure(family: str, name: str, beams=(1, 4), batches=(1, 16)) -> dict:
    """``--cpu-time``: tokens per CPU-second at one thread, the best of 5 runs per case."""
    run = engine(family, name, 1)
    results = {}
    for beam in beams:
        for batch in batches:
            srcs = sources(family, batch)
            run(srcs, beam)  # warm-up (plans, caches)
            times = []
            for _ in range(5):
                start = time.process_time()
                run(srcs, beam)
                times.append(time.process_time() - start)
            results[f"beam {beam}, batch {batch} (tok per CPU-s, 1 thread)"] = batch * NEW_TOKENS / min(times)
    return results


def run_all(families, engines, rounds: int, ort_python: str | None) -> dict:
    """family -> peers.py rows, one child process per (engine, threads); ONNX Runtime skipped without export."""
    out = {}
    for family in families:
        root = prepare(family)
        todo = [e for e in engines if e not in peers.ORT or export_onnx.export(root, ort_python) is not None]
        rows = []
        for name in todo:
            py = export_onnx.export_python(ort_python) if name == "ort-generate" else sys.executable
            for threads in peers.THREADS.get(name, (1, 2)):
                cmd = [py, __file__, "--child", family, name, str(threads), "--rounds", str(rounds)]
                row = peers.spawn(cmd, name, threads, what=SHAPES[family])
                rows += [row] if row else []
        out[family] = rows
        print(f"\n{SHAPES[family]} shapes (tokens/s at the better of {{1, 2}} threads; transformers at 2; load at the end "
              "of each process: " + ", ".join(f"{r['engine']} t={r['threads']} {r['load']:.1f}" for r in rows) + ")")
        print("\n".join(peers.table(rows)), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", choices=sorted(FAMILIES))
    parser.add_argument("--engine", choices=peers.ENGINES)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--families", default="bart,m2m_100,t5")
    parser.add_argument("--engines", default=",".join(peers.ENGINES), help="with --all: the engines run")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per case at most (peers.py: fewer past its budget)")
    parser.add_argument("--ort-python", help="interpreter with optimum-onnx for the ONNX export and ort-generate")
    parser.add_argument("--json", help="with --all: also write the rows here")
    parser.add_argument("--beams", default="1,4", help="with --cpu-time")
    parser.add_argument("--batches", default="1,16", help="with --cpu-time")
    parser.add_argument("--cpu-time", action="store_true", help="one thread, tokens per CPU-second (see the docstring)")
    parser.add_argument("--child", nargs=3, metavar=("FAMILY", "ENGINE", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        family, name, threads = args.child[0], args.child[1], int(args.child[2])
        print(json.dumps(peers.child(name, threads, args.rounds, make=lambda e: engine(family, e, threads),
                                     sources=lambda b: sources(family, b))))
        return
    if not args.all:
        beams, batches = [int(b) for b in args.beams.split(",")], [int(b) for b in args.batches.split(",")]
        if args.cpu_time:
            print(json.dumps(measure(args.family, args.engine, beams, batches)))
            return
        row = peers.child(args.engine, args.threads, args.rounds, make=lambda e: engine(args.family, e, args.threads),
                          sources=lambda b: sources(args.family, b))
        print(json.dumps({f"beam {c['beam']}, batch {c['batch']}": round(c["tok_s"], 1) for c in row["cases"]}))
        return
    start, load0 = time.time(), os.getloadavg()
    print(f"{w.cpu_name()}, {os.cpu_count()} CPUs; load at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    rows = run_all(args.families.split(","), args.engines.split(","), args.rounds, args.ort_python)
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
    print(f"\n{(time.time() - start) / 60:.1f} min; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
