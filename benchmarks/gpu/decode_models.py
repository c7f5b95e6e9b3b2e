"""Decoding on the GPU: seqjit (``device="cuda"``) against transformers / PyTorch on CUDA and
CTranslate2 on CUDA (when installed), each engine in its own process. Prepared for a machine with an
NVIDIA GPU; ``check_and_time.py`` runs it after the kernel table.

    python benchmarks/gpu/decode_models.py [--out FILE] [--models tiny,g2p,marian] [--batches 1,16,64]
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu/decode_models.py --quick   # no GPU: the harness only

Workloads (greedy, every engine generating exactly the same number of tokens per source:
minimum = maximum length, the end token banned until then):

- ``tiny``: the tiny Transformer of ``benchmarks/decoding/small_workload.py`` (Marian config,
  d_model 128, 2 + 2 layers, vocabulary 100), 10-token sources, 10 new tokens; seqjit,
  transformers, CTranslate2.
- ``g2p``: the three bundled G2P models (``gru``, ``attention``, ``transformer``), CMUdict-like
  words of 4-12 letters (random letters), 8 new phonemes; seqjit against the same weights as PyTorch
  modules (``benchmarks/g2p/training/torch_models.torch_module``) stepped greedily on CUDA (one ``argmax`` per step).
- ``marian``: Marian at opus-mt-en-de size with seeded random weights, built as
  ``benchmarks/decoding/workload.py`` builds it (vocabulary 58101, 6 + 6 layers, d_model 512),
  20-token sources, 20 new tokens; seqjit, transformers, CTranslate2.

Batches 1 / 16 / 64; tok/s = generated tokens / wall time, the median of timed runs after one
warm-up run (each batch runs at least ``--min-runs`` times and for at least ``--min-seconds``).
An engine's process times out after ``--timeout`` seconds (100; seqjit's, which compiles its kernels on
first use, after twice that), or sooner to keep every engine within ``--budget`` (290 s) in all: the
table keeps the rows it finished and says so. The id
columns give the share of sources whose ids equal seqjit's (random weights make near-ties, where
GPU and CPU float32 may legitimately differ).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "decoding"))
sys.path.insert(0, str(HERE))
from gpu_timing import device_name  # noqa: E402

ENGINES = {"tiny": ("seqjit", "transformers", "ctranslate2"), "marian": ("seqjit", "transformers", "ctranslate2")}
G2P = ("gru", "attention", "transformer")


def cache_dir() -> Path:
    return Path(os.environ.get("SEQJIT_BENCH_CACHE", "/tmp/seqjit-bench-gpu"))


# -- workloads ----------------------------------------------------------------------------------------
def workload(model: str, quick: bool) -> dict:
    """``{"config": MarianConfig kwargs or None, "src_len", "new", "vocab", "pad", "eos"}``."""
    if model in ("tiny", "marian"):
        if model == "tiny":
            import small_workload as sw

            config, src_len, new = dict(sw.TINY), sw.TINY_SRC, sw.TINY_NEW
        else:
            import workload as w

            config, src_len, new = dict(w.MARIAN), w.SRC_LEN, w.NEW_TOKENS
        if quick:  # a few layers of a few units: runs on the simulator
            config.update(d_model=16, encoder_layers=1, decoder_layers=1, encoder_ffn_dim=32, decoder_ffn_dim=32,
                          encoder_attention_heads=2, decoder_attention_heads=2, vocab_size=min(config["vocab_size"], 100))
            config.update(pad_token_id=config["vocab_size"] - 1, decoder_start_token_id=config["vocab_size"] - 1)
            src_len, new = 4, 3
        return dict(config=config, src_len=src_len, new=new, vocab=config["vocab_size"], pad=config["pad_token_id"],
                    eos=config["eos_token_id"])
    return dict(config=None, src_len=None, new=3 if quick else 8)


def hf_dir(model: str, quick: bool) -> Path:
    """The model saved the Hugging Face way (built once, seeded, as the CPU benchmarks build it)."""
    spec = workload(model, quick)
    path = cache_dir() / f"{model}{'-quick' if quick else ''}" / "hf"
    if not (path / "model.safetensors").exists():
        import torch
        from transformers import MarianConfig, MarianMTModel

        torch.manual_seed(0)
        hf = MarianMTModel(MarianConfig(**spec["config"])).eval()
        with torch.no_grad():
            if model == "tiny":
                for name, p in hf.named_parameters():
                    if "embed_positions" not in name and "layer_norm" not in name:
                        p.normal_(0, 0.2)
            else:
                hf.model.shared.weight[spec["pad"]].zero_()
        hf.save_pretrained(path)
    return path


def ct2_dir(model: str, quick: bool) -> Path:
    path = hf_dir(model, quick).parent / "ct2"
    if not (path / "model.bin").exists():
        from ctranslate2.converters import TransformersConverter

        spec = workload(model, quick)

        class Tokenizer:
            eos_token, unk_token, pad_token, bos_token = "</s>", "<unk>", "<pad>", None
            special_tokens_map: dict = {}

            def get_vocab(self):
                names = {spec["eos"]: "</s>", 1: "<unk>", spec["pad"]: "<pad>"}
                return {names.get(i, f"t{i}"): i for i in range(spec["vocab"])}

        class Converter(TransformersConverter):
            def load_tokenizer(self, *args, **kwargs):
                return Tokenizer()

        Converter(str(hf_dir(model, quick))).convert(str(path), quantization="float32", force=True)
    return path


def sources(model: str, batch: int, quick: bool) -> list:
    rng = np.random.default_rng(batch)
    spec = workload(model, quick)
    if spec["config"] is None:  # G2P: letters of the model's source vocabulary (ids 3 and up)
        return [rng.integers(3, 29, int(n)).tolist() for n in rng.integers(4, 13, batch)]
    return [rng.integers(3, spec["vocab"] - 1, spec["src_len"] - 1).tolist() + [spec["eos"]] for _ in range(batch)]


# -- engines: runner(model, quick) -> run(sources) -> list of id lists --------------------------------
def seqjit_runner(model: str, quick: bool):
    import seqjit

    new = workload(model, quick)["new"]
    if model.startswith("g2p-"):
        from seqjit.g2p.predictor import model_dir

        m = seqjit.load(model_dir(model[4:]), device="cuda")
    else:
        m = seqjit.from_hf(hf_dir(model, quick), device="cuda")
    return lambda srcs: [r.ids[0] for r in m.generate(srcs, max_length=new, min_length=new, max_batch_size=len(srcs))]


def transformers_runner(model: str, quick: bool):
    import torch
    from transformers import MarianMTModel

    spec = workload(model, quick)
    hf = MarianMTModel.from_pretrained(hf_dir(model, quick), dtype=torch.float32).eval().to("cuda")

    def run(srcs):
        with torch.inference_mode():
            ids = torch.tensor(srcs, device="cuda")
            out = hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=1,
                              min_new_tokens=spec["new"], max_new_tokens=spec["new"], bad_words_ids=[[spec["pad"]]],
                              forced_eos_token_id=None)
        return out[:, 1:].tolist()
    return run


def ctranslate2_runner(model: str, quick: bool):
    import ctranslate2

    spec = workload(model, quick)
    tr = ctranslate2.Translator(str(ct2_dir(model, quick)), device="cuda", compute_type="float32")
    names = {spec["eos"]: "</s>", 1: "<unk>", spec["pad"]: "<pad>"}
    ids = {v: k for k, v in names.items()}

    def run(srcs):
        out = tr.translate_batch([[names.get(i, f"t{i}") for i in s] for s in srcs], beam_size=1,
                                 max_batch_size=len(srcs), min_decoding_length=spec["new"],
                                 max_decoding_length=spec["new"])
        return [[ids[n] if n in ids else int(n[1:]) for n in r.hypotheses[0]] for r in out]
    return run


def torch_runner(model: str, quick: bool):
    """A bundled G2P model as its PyTorch module on CUDA, stepped greedily (argmax on the device)."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "g2p" / "training"))
    from torch_models import BOS, EOS, PAD, TransformerG2P, torch_module

    module, _ = torch_module(model[4:])
    module = module.to("cuda")
    new = workload(model, quick)["new"]

    def run(srcs):
        src = torch.zeros((len(srcs), max(map(len, srcs))), dtype=torch.long)
        for i, row in enumerate(srcs):
            src[i, :len(row)] = torch.tensor(row)
        lengths = torch.tensor([len(r) for r in srcs])
        with torch.inference_mode():
            state = module.start(src.to("cuda"), lengths)
            prev = torch.full((len(srcs),), BOS, dtype=torch.long, device="cuda")
            steps = []
            for t in range(new):
                logits = module.step(state, None if (t == 0 and isinstance(module, TransformerG2P)) else prev)
                logits[:, PAD] = float("-inf")
                logits[:, EOS] = float("-inf")
                prev = logits.argmax(-1)
                steps.append(prev)
            return torch.stack(steps, 1).tolist()
    return run


RUNNERS = {"seqjit": seqjit_runner, "transformers": transformers_runner, "ctranslate2": ctranslate2_runner,
           "torch": torch_runner}


def engines_of(model: str) -> tuple:
    return ("seqjit", "torch") if model.startswith("g2p-") else ENGINES[model]


# -- one engine's process -----------------------------------------------------------------------------
def child(engine: str, models: list, batches: list, quick: bool, min_runs: int, min_seconds: float,
          save=lambda rows: None) -> list:
    """Every (model, batch) of ``engine``; ``save(rows)`` after each (a timed-out child keeps its rows)."""
    rows = []
    for model in models:
        if engine not in engines_of(model):
            continue
        t0 = time.perf_counter()
        run = RUNNERS[engine](model, quick)
        load_s = time.perf_counter() - t0
        new = workload(model, quick)["new"]
        for batch in batches:
            srcs = sources(model, batch, quick)
            t0 = time.perf_counter()
            ids = run(srcs)  # warm-up (compiles kernels, fills caches)
            first_s = time.perf_counter() - t0
            times = []
            start = time.perf_counter()
            while len(times) < min_runs or time.perf_counter() - start < min_seconds:
                t0 = time.perf_counter()
                run(srcs)
                times.append(time.perf_counter() - t0)
            rows.append(dict(model=model, engine=engine, batch=batch, tok_s=batch * new / statistics.median(times),
                             runs=len(times), first_s=first_s, load_s=load_s, ids=ids))
            print(f"{engine} {model} batch {batch}: {rows[-1]['tok_s']:.0f} tok/s", file=sys.stderr, flush=True)
            save(rows)
    return rows


def run_engine(engine: str, args, tmp: Path, limit: float) -> tuple[list, str]:
    out = tmp / f"{engine}.json"
    cmd = [sys.executable, __file__, "--child", engine, "--json", str(out), "--models", ",".join(args.models),
           "--batches", ",".join(map(str, args.batches)), "--min-runs", str(args.min_runs),
           "--min-seconds", str(args.min_seconds)] + (["--quick"] if args.quick else [])
    timeout = min(limit, args.timeout if engine != "seqjit" else 2 * args.timeout)  # (seqjit compiles on first use)
    try:
        done = subprocess.run(cmd, cwd=ROOT, timeout=timeout, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return (json.loads(out.read_text()) if out.exists() else []), f"timed out after {timeout:.0f} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return (json.loads(out.read_text()) if out.exists() else []), f"failed: {last[:120]}"
    return json.loads(out.read_text()), ""


def available(engine: str) -> str:
    """Why ``engine`` cannot run here ("" when it can)."""
    try:
        if engine in ("transformers", "torch"):
            import torch

            return "" if torch.cuda.is_available() else "torch sees no CUDA device"
        if engine == "ctranslate2":
            import ctranslate2

            return "" if ctranslate2.get_cuda_device_count() > 0 else "CTranslate2 sees no CUDA device"
    except ImportError as exc:
        return f"not installed ({exc.name})"
    return ""


def _rate(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def table(rows: list, notes: dict, header: list) -> str:
    by = {(r["model"], r["engine"], r["batch"]): r for r in rows}
    models = sorted({r["model"] for r in rows}, key=lambda m: (m != "tiny", m.startswith("g2p"), m))
    lines = list(header) + ["| model | batch | seqjit tok/s | peer | peer tok/s | seqjit / peer | same ids |",
                            "|---|---:|---:|---|---:|---:|---:|"]
    for model in models:
        for batch in sorted({r["batch"] for r in rows if r["model"] == model}):
            mine = by.get((model, "seqjit", batch))
            for peer in engines_of(model)[1:]:
                theirs = by.get((model, peer, batch))
                s = _rate(mine["tok_s"]) if mine else notes.get("seqjit", "-")
                p = _rate(theirs["tok_s"]) if theirs else notes.get(peer, "-")
                ratio = f"{mine['tok_s'] / theirs['tok_s']:.2f}x" if mine and theirs else "-"
                same = "-"
                if mine and theirs:
                    same = f"{sum(a == b for a, b in zip(mine['ids'], theirs['ids']))}/{len(mine['ids'])}"
                lines.append(f"| {model} | {batch} | {s} | {peer} | {p} | {ratio} | {same} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny models, a batch of 1 and 2 (the simulator)")
    parser.add_argument("--models", default="tiny,g2p,marian", help="tiny, g2p (the three bundled models), marian")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--engines", default="seqjit,transformers,torch,ctranslate2")
    parser.add_argument("--min-runs", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--timeout", type=int, default=100, help="seconds per peer process (seqjit: twice that)")
    parser.add_argument("--budget", type=float, default=290, help="seconds for every engine together")
    parser.add_argument("--out", default="")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--json", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    models = []
    for m in args.models.split(","):
        models += [f"g2p-{g}" for g in G2P] if m == "g2p" else [m]
    args.models = [m for m in models if m]
    args.batches = [1, 2] if args.quick and args.batches == "1,16,64" else [int(b) for b in args.batches.split(",")]
    if args.quick:
        args.models = [m for m in args.models if not m.startswith("g2p-")] or ["tiny"]
        args.min_runs, args.min_seconds = 1, 0.0
    if args.child:
        child(args.child, args.models, args.batches, args.quick, args.min_runs, args.min_seconds,
              lambda rows: Path(args.json).write_text(json.dumps(rows)))
        return 0
    t0 = time.perf_counter()
    rows, notes = [], {}
    engines = [e for e in args.engines.split(",") if e]
    with tempfile.TemporaryDirectory() as tmp:
        for k, engine in enumerate(engines):
            why = "" if engine == "seqjit" else available(engine)
            if why:
                notes[engine] = why
                continue
            print(f"== {engine}", file=sys.stderr, flush=True)
            left = args.budget - (time.perf_counter() - t0) - 30 * (len(engines) - k - 1)  # 30 s kept per engine to come
            got, note = run_engine(engine, args, Path(tmp), max(30.0, left))
            rows += got
            if note:
                notes[engine] = note
    device = device_name()
    header = [f"# seqjit decoding on the GPU ({'quick' if args.quick else 'full'} sizes)", "",
              f"device: {device}; greedy, tok/s = generated tokens / median wall time after a warm-up run; "
              f"total {time.perf_counter() - t0:.0f} s.", ""]
    header += [f"- {engine}: {why}" for engine, why in notes.items()] + ([""] if notes else [])
    text = table(rows, notes, header)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 1 if "seqjit" in notes else 0


if __name__ == "__main__":
    sys.exit(main())
