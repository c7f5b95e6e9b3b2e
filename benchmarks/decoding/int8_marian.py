"""int8 Marian (opus-mt-en-de size, seeded random weights: workload.py) against float32 and CTranslate2
int8: greedy tokens/s at batch 1 and 16 with 1 and 2 threads, each engine in its own process; peak
resident memory; model directory sizes; the batch-1 weight-read floor; int8-vs-float32 accuracy.

    python benchmarks/decoding/int8_marian.py [--rounds 3]
    python benchmarks/decoding/int8_marian.py --beam 4 --speed-only     # beam search, tokens/s only

Every engine decodes exactly NEW_TOKENS (20) tokens for SRC_LEN (20) token sources. CTranslate2 int8
is its float32 conversion loaded with ``compute_type="int8"`` (weights quantized at load, as its
converter's ``--quantization int8`` would store them). The floor: the int8 bytes a decoder step reads
(every decoder projection except the cross-attention K/V, computed once per source, plus the
output projection) over the bandwidth a large int8 matrix-vector product reaches here.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import workload as w  # noqa: E402

ENGINES = ("seqjit fp32", "seqjit int8", "ctranslate2 int8", "ctranslate2 fp32")


def int8_dir() -> Path:
    root = w.prepare_marian()
    out = root / "seqjit_int8"
    if not (out / "model.safetensors").exists():
        import seqjit

        seqjit.quantize(seqjit.convert.from_hf(root / "hf"), "int8").save(out)
    return out


def engine(name: str, threads: int, beam: int = 1):
    import seqjit

    seqjit.set_num_threads(threads)
    root = w.prepare_marian()
    if name.startswith("seqjit"):
        model = seqjit.load(int8_dir()) if name.endswith("int8") else seqjit.convert.from_hf(root / "hf")
        return lambda srcs: [r.ids[0] for r in model.generate(
            srcs, max_length=w.NEW_TOKENS, min_length=w.NEW_TOKENS, beam_size=beam, max_batch_size=len(srcs))]
    import ctranslate2

    tr = ctranslate2.Translator(str(root / "ct2"), device="cpu", compute_type=name.split()[1].replace("fp", "float"),
                                intra_threads=threads, inter_threads=1)

    def run(srcs):
        out = tr.translate_batch([w.token_names(s) for s in srcs], beam_size=beam, max_batch_size=len(srcs),
                                 min_decoding_length=w.NEW_TOKENS, max_decoding_length=w.NEW_TOKENS)
        return [w.token_ids(r.hypotheses[0]) for r in out]
    return run


def child(name: str, threads: int, rounds: int, beam: int = 1) -> dict:
    run = engine(name, threads, beam)
    result = {"engine": name, "threads": threads, "beam": beam}
    for batch in (1, 16):
        srcs = w.sources(batch)
        run(srcs)  # warm up
        times = []
        for _ in range(rounds if batch == 1 else max(1, rounds // 2 + 1)):
            t = time.perf_counter()
            out = run(srcs)
            times.append(time.perf_counter() - t)
        assert all(len(o) == w.NEW_TOKENS for o in out), [len(o) for o in out]
        result[f"tok_s_{batch}"] = batch * w.NEW_TOKENS / statistics.median(times)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, Linux does not carry it over from
    the parent across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def floor(threads: int) -> dict:
    """Bytes of int8 weights per decoder step and the read bandwidth of a 74 MB int8 GEMV (more than
    the 32 MB L3), in 4 KB pages and in 2 MB pages (transparent huge pages, as the native replay asks
    for its large weights: kernels/linear_int8/huge_pages.py)."""
    import mmap

    import numpy as np

    import seqjit
    from seqjit import kernels

    seqjit.set_num_threads(threads)
    model = seqjit.load(int8_dir())
    # the decoder's projections (not the cross-attention K/V) and the output projection (the shared
    # int8 table); the decoder embedding lookup reads one row per sequence
    step = sum(a.nbytes for n, a in model.weights.items()
               if a.dtype == np.int8 and n.startswith(("decoder.layers.", "lm_head", "shared."))
               and ".encoder_attn.k_proj" not in n and ".encoder_attn.v_proj" not in n)
    rng = np.random.default_rng(0)
    rows = 145000
    scale = np.ones(rows, np.float32)
    x = rng.standard_normal((1, 512), dtype=np.float32)
    f = kernels.get("linear_int8")
    out = {"step_bytes": step}
    for pages in ("4k", "2m"):
        buf = mmap.mmap(-1, rows * 512 + (4 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if pages == "2m":
            buf.madvise(mmap.MADV_HUGEPAGE)
        raw = np.frombuffer(buf, np.uint8)
        start = (-raw.ctypes.data) % (2 << 20)
        big = raw[start:start + rows * 512].view(np.int8).reshape(rows, 512)
        big[...] = rng.integers(-127, 128, (rows, 512), dtype=np.int8)
        f(x, big, scale)
        times = []
        for _ in range(15):
            t = time.perf_counter()
            f(x, big, scale)
            times.append(time.perf_counter() - t)
        bandwidth = big.nbytes / min(times)  # the best of 15: what the machine reaches
        out[f"gemv_gb_s_{pages}"], out[f"floor_tok_s_{pages}"] = bandwidth / 1e9, bandwidth / step
        del big, raw, buf
    return out


def accuracy() -> dict:
    import numpy as np

    import seqjit

    root = w.prepare_marian()
    fp32, int8 = seqjit.convert.from_hf(root / "hf"), seqjit.load(int8_dir())
    rng = np.random.default_rng(0)
    src = rng.integers(3, w.VOCAB - 1, (8, 20))
    tgt = np.concatenate([np.full((8, 1), w.PAD), rng.integers(3, w.VOCAB - 1, (8, 19))], axis=1)
    a, b = fp32.logits(src, tgt), int8.logits(src, tgt)
    return {"top1": float((a.argmax(-1) == b.argmax(-1)).mean()), "max_err": float(np.abs(a - b).max()),
            "mean_err": float(np.abs(a - b).mean()), "logit_std": float(a.std())}


def speed_table(rows: list, beam: int) -> str:
    """tokens/s per engine at its best thread setting, and each seqjit engine over the CTranslate2
    engine of its precision (best vs best)."""
    best = {}
    for r in rows:
        for batch in (1, 16):
            key = (r["engine"], batch)
            if key not in best or r[f"tok_s_{batch}"] > best[key][0]:
                best[key] = (r[f"tok_s_{batch}"], r["threads"])
    lines = [f"beam {beam}: tokens/s, best of 1 and 2 threads", "", "| engine | batch 1 | batch 16 | vs CTranslate2 (1 / 16) |",
             "|---|---:|---:|---:|"]
    for name in dict.fromkeys(r["engine"] for r in rows):
        cells = [f"{best[(name, b)][0]:.1f} (t={best[(name, b)][1]})" for b in (1, 16)]
        peer = "ctranslate2 " + name.split()[1] if name.startswith("seqjit") else None
        ratio = " / ".join(f"{best[(name, b)][0] / best[(peer, b)][0]:.2f}x" for b in (1, 16)) \
            if peer and (peer, 1) in best else ""
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file()) / 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--beam", type=int, default=1, help="beam size of every engine (1: greedy)")
    p.add_argument("--speed-only", action="store_true", help="tokens/s only: no floor, accuracy or sizes")
    p.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {', '.join(ENGINES)}")
    p.add_argument("--child", nargs=2, metavar=("ENGINE", "THREADS"), help=argparse.SUPPRESS)
    p.add_argument("--floor", type=int, metavar="THREADS", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.rounds, args.beam)))
        return 0
    if args.floor:
        print(json.dumps(floor(args.floor)))
        return 0
    root = w.prepare_marian()
    int8_dir()
    rows = []
    for name in args.engines.split(","):
        for threads in (1, 2):
            out = subprocess.run([sys.executable, __file__, "--child", name, str(threads), "--rounds", str(args.rounds),
                                  "--beam", str(args.beam)], check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    if args.speed_only:
        print(speed_table(rows, args.beam))
        return 0
    floors = {t: json.loads(subprocess.run([sys.executable, __file__, "--floor", str(t)], check=True,
                                           capture_output=True, text=True).stdout.strip().splitlines()[-1])
              for t in (1, 2)}
    acc = accuracy()
    print("\n| engine | threads | batch 1 tok/s | batch 16 tok/s | peak RSS MB |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['engine']} | {r['threads']} | {r['tok_s_1']:.1f} | {r['tok_s_16']:.1f} | {r['peak_rss_mb']:.0f} |")
    print(f"\nmodel directories: seqjit float32 (Hugging Face dir) {size_mb(root / 'hf'):.0f} MB, seqjit int8 "
          f"{size_mb(int8_dir()):.0f} MB, CTranslate2 float32 {size_mb(root / 'ct2'):.0f} MB")
    for t, f in floors.items():
        print(f"batch-1 floor, {t} thread(s): {f['step_bytes'] / 1e6:.1f} MB of int8 weights per step; a 74 MB int8 "
              f"GEMV reads {f['gemv_gb_s_4k']:.1f} GB/s in 4 KB pages -> {f['floor_tok_s_4k']:.0f} tok/s, "
              f"{f['gemv_gb_s_2m']:.1f} GB/s in 2 MB pages -> {f['floor_tok_s_2m']:.0f} tok/s")
    print(f"accuracy (8 x 20 teacher-forced positions): top-1 agreement {acc['top1']:.3f}, max |logit error| "
          f"{acc['max_err']:.4f}, mean {acc['mean_err']:.5f} (logit std {acc['logit_std']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
