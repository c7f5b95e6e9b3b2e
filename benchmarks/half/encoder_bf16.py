"""The Marian encoder (opus-mt-en-de size: d_model 512, ffn 2048, 6 layers, vocab 58101; seeded random
weights, benchmarks/decoding/workload.py's model) at batch 16 (16 sources of 20 tokens): float32,
bfloat16 weights (float32 products), and bfloat16 arithmetic (vdpbf16ps products,
``seqjit.quantize(model, "bfloat16", arithmetic="bfloat16")``), one thread, in one process, rounds
alternating; prints each one's median time and its speed-up over float32.

    taskset -c 1 python3 benchmarks/half/encoder_bf16.py [--rounds 15] [--batch 16]

Also prints how far the bf16-arithmetic encoder's output lies from the float32 one's."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "decoding"))
import workload as w  # noqa: E402  (benchmarks/decoding/workload.py: the Marian config and sources)


def hf_dir() -> Path:
    """workload.py's seeded Marian as a Hugging Face directory (made once, cached)."""
    path = w.cache_dir() / "hf"
    if not (path / "model.safetensors").exists():
        import torch
        from transformers import MarianConfig, MarianMTModel

        torch.manual_seed(0)
        model = MarianMTModel(MarianConfig(**w.MARIAN)).eval()
        with torch.no_grad():
            model.model.shared.weight[w.PAD].zero_()
        model.save_pretrained(path)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args(argv)
    import seqjit
    from seqjit.graph import _native_vm

    seqjit.set_num_threads(1)
    f32 = seqjit.convert.from_hf(hf_dir())
    models = {"float32": f32, "bfloat16 weights": seqjit.quantize(f32, "bfloat16"),
              "bfloat16 arithmetic": seqjit.quantize(f32, "bfloat16", arithmetic="bfloat16")}
    src = np.array(w.sources(args.batch), np.int64)
    outs = {name: m.encode(src)["memory"] for name, m in models.items()}  # first calls: plans made
    times = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, m in models.items():
            t = time.perf_counter()
            m.encode(src)
            times[name].append(time.perf_counter() - t)
    print(f"Marian encoder, batch {args.batch} x {w.SRC_LEN} tokens, 1 thread, median of {args.rounds} "
          f"(bf16 products: {_native_vm.bf16_isa()}, pid {os.getpid()})")
    base = statistics.median(times["float32"])
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"  {name:22s} {t * 1e3:8.2f} ms  {base / t:5.2f}x float32")
    ref = outs["float32"]
    for name in ("bfloat16 weights", "bfloat16 arithmetic"):
        d = np.abs(outs[name] - ref)
        print(f"  {name:22s} output vs float32: max |diff| {d.max():.3g}, mean {d.mean():.3g} "
              f"(output rms {np.sqrt(np.mean(ref ** 2)):.3g})")


if __name__ == "__main__":
    main()
