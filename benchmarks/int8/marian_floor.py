"""int8 Marian (opus-mt-en-de size, seeded random weights: benchmarks/decoding/workload.py): the model
directory sizes, the batch-1 weight-read floor, and int8-vs-float32 accuracy. Its speed against
CTranslate2 int8 is the harness's ``marian-int8`` workload (docs/benchmarks.md).

    python benchmarks/int8/marian_floor.py

The floor: the int8 bytes a decoder step reads (every decoder projection except the cross-attention
K/V, computed once per source, plus the output projection) over the bandwidth a large int8
matrix-vector product reaches here, in a process per thread count.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "decoding"))
import workload as w  # noqa: E402


def int8_dir() -> Path:
    root = w.prepare_marian()
    out = root / "seqjit_int8"
    if not (out / "model.safetensors").exists():
        import seqjit

        seqjit.quantize(seqjit.convert.from_hf(root / "hf"), "int8").save(out)
    return out


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


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file()) / 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--floor", type=int, metavar="THREADS", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.floor:
        print(json.dumps(floor(args.floor)))
        return 0
    root = w.prepare_marian()
    int8_dir()
    floors = {t: json.loads(subprocess.run([sys.executable, __file__, "--floor", str(t)], check=True,
                                           capture_output=True, text=True).stdout.strip().splitlines()[-1])
              for t in (1, 2)}
    acc = accuracy()
    print(f"model directories: seqjit float32 (Hugging Face dir) {size_mb(root / 'hf'):.0f} MB, seqjit int8 "
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
