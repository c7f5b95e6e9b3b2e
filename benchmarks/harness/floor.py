"""The memory floor of a batch-1 greedy decode (issue 35): how many bytes of weights one decoder step
reads, and what share of this host's read bandwidth an engine's tokens per second make of them.

At batch 1 a Transformer decoder step reads every weight of the step once (the self-attention
projections, the cross-attention query and output projections, the feed-forward pair and the
output projection; the cross-attention keys and values are the encoder's, made once per source), so
``tok/s x bytes per step`` is the rate it reads memory at, to be set beside the host's read
bandwidth (``benchmarks/gemm/roofline_probe.c``: a vector sum over a 512 MB buffer, 1 and 2
threads, best of many short runs). Only where the weights exceed the last-level cache is that a
memory rate; the harness says so when they do not.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

PROBE = Path(__file__).resolve().parents[1] / "gemm" / "roofline_probe.c"

#: bytes of one weight as each engine stores it (int8: per-row float32 scales beside, counted apart)
WEIGHT_BYTES = {"seqjit": 4, "ctranslate2": 4, "onnxruntime": 4, "ort-generate": 4, "transformers": 4,
                "seqjit-float16": 2, "seqjit-bfloat16": 2, "seqjit-int8": 1, "ctranslate2-int8": 1}


def roofline(runs: int = 3) -> dict:
    """``{"lanes", "peak_1t", "peak_2t", "read_1t", "read_2t"}`` (GFLOP/s, GB/s): the best of ``runs``
    runs of the probe, built with this host's own flags."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "probe")
        subprocess.run(["cc", "-O2", "-march=native", "-pthread", "-o", exe, str(PROBE)], check=True)
        out = [json.loads(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)
               for _ in range(runs)]
    return {key: max(r[key] for r in out) for key in out[0]}


def step_matrices(config: dict) -> tuple[int, int]:
    """(weights, rows) a batch-1 decoder step of a Marian/BART-style ``config`` (config.json) reads:
    per layer q, k, v, o of self-attention, q and o of cross-attention, fc1 and fc2 (biases included),
    then the output projection over the target vocabulary; rows: the output rows (an int8 engine
    reads one float32 scale per row)."""
    d, ffn, layers = config["d_model"], config["decoder_ffn_dim"], config["decoder_layers"]
    vocab = config.get("decoder_vocab_size") or config["vocab_size"]
    per_layer = 6 * (d * d + d) + (d * ffn + ffn) + (ffn * d + d)
    rows = layers * (6 * d + ffn + d) + vocab
    return layers * per_layer + vocab * d + vocab, rows


def step_bytes(config: dict, engine: str) -> int | None:
    """Bytes of weights one batch-1 step of ``engine`` reads (None: an engine of unknown storage)."""
    per = WEIGHT_BYTES.get(engine.partition("@")[0])
    if per is None:
        return None
    weights, rows = step_matrices(config)
    return weights * per + (4 * rows if per == 1 else 0)


def llc_bytes() -> int:
    """This host's largest data cache (Linux sysfs; 0 when unknown)."""
    best = 0
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (d / "type").read_text().strip() == "Instruction":
                continue
            text = (d / "size").read_text().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * scale)
        except (OSError, ValueError):
            continue
    return best


def lines(config: dict, best: dict, roof: dict, batch: int = 1) -> list[str]:
    """Markdown lines: per engine at ``batch`` (``best``: (engine, batch) -> {"rate", "threads"} of
    table.best), the bytes per step, the read rate it makes and its share of the host's at that
    engine's thread count (and of one core's, issue 35's yardstick: >= 70%)."""
    llc = llc_bytes()
    out = []
    for (engine, b), v in best.items():
        nbytes = step_bytes(config, engine)
        if b != batch or nbytes is None:
            continue
        rate = v["rate"] * nbytes / 1e9
        host, one = roof[f"read_{min(v['threads'], 2)}t"], roof["read_1t"]
        out.append(f"{engine} {nbytes / 1e6:,.0f} MB per step x {v['rate']:,.1f} tok/s = {rate:.1f} GB/s, "
                   f"{100 * rate / host:.0f}% of the host's {host:.1f} GB/s at {v['threads']} thread(s)"
                   + (f" ({100 * rate / one:.0f}% of one core's)" if v["threads"] > 1 else "")
                   + ("" if nbytes > llc else f" (the weights fit the {llc >> 20} MB last-level cache: not a memory rate)"))
    if not out:
        return []
    return ["", f"Batch-{batch} memory floor (benchmarks/harness/floor.py; read bandwidth "
                f"{roof['read_1t']:.1f} / {roof['read_2t']:.1f} GB/s at 1 / 2 threads, roofline_probe.c): "
            + "; ".join(out) + "."]
