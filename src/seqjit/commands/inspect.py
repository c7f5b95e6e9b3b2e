"""``seqjit inspect MODEL``: what a model is and what it costs.

MODEL: a seqjit model directory, a Hugging Face directory (converted in memory), or a
bundled G2P model name (``gru``, ``attention``, ``transformer``). Prints the architecture, the
config, the parameter count, the weights' bytes and dtypes, the op counts of the encoder graph and
of the decoder-step graph (as run, after the graph passes), and a memory estimate: the weights plus
the decoder state for batch 1 and batch 16 at ``--max-length`` (default 256, or the model's positions
when fewer, as ``generate`` decodes; at most those positions and 65536). ``--json`` prints the same
as one JSON object. ``--kernels`` (no MODEL) prints the instruction set each native kernel family
runs (the CPU's best, or lower under ``$SEQJIT_ISA``), then the native linear kernel chosen on this
host per shape class and the candidates' measured GFLOP/s.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

BATCHES = (1, 16)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "inspect", help="show a model's architecture, config, parameters, graphs and memory",
        description="Show a model's architecture, config, parameter count, weight bytes, the op counts of its encoder "
                    "and decoder-step graphs, and a memory estimate (weights + decoder state).")
    p.add_argument("model", metavar="MODEL", nargs="?",
                   help="a model directory, a Hugging Face directory, or a bundled G2P model name "
                        "(gru, attention, transformer)")
    p.add_argument("--max-length", type=int, default=None, metavar="N",
                   help="decoder state capacity for the memory estimate (default: 256, or the model's positions "
                        "when fewer)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--kernels", action="store_true",
                   help="instead of a model: the native linear kernel chosen on this host per shape class, with the "
                        "candidates' measured GFLOP/s (measured now where not cached; see seqjit.graph.kernel_choice)")
    p.set_defaults(func=run)


def resolve(name) -> Path:
    """A directory for MODEL: a bundled G2P model name, or a path."""
    try:
        from seqjit.g2p.predictor import BUNDLED, model_dir
    except ImportError:  # the G2P package is optional here
        BUNDLED, model_dir = (), None
    if model_dir is not None and name in BUNDLED and not Path(name).exists():
        return Path(model_dir(name))
    return Path(name)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _op_counts(model, name: str) -> dict:
    graph = model.executor(name).graph
    counts = Counter(node.op for node in graph.nodes)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _state_bytes(specs: dict) -> int:
    return sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in specs.values())  # no int64 overflow


def describe(model, *, max_length: int = 256, path=None) -> dict:
    """Everything ``inspect`` prints, as plain JSON-able values."""
    weights = model.weights
    params = sum(int(w.size) for w in weights.values())
    from seqjit.models.quantization import half_format

    half = half_format(model.config)  # a 16-bit model's uint16 weights are shown by their format
    by_dtype: dict = {}
    for w in weights.values():
        name = half if half is not None and w.dtype == np.uint16 else np.dtype(w.dtype).name
        entry = by_dtype.setdefault(name, {"parameters": 0, "bytes": 0})
        entry["parameters"] += int(w.size)
        entry["bytes"] += int(w.nbytes)
    weight_bytes = sum(int(w.nbytes) for w in weights.values())
    config = {k: v for k, v in model.config.to_dict().items() if k not in ("architecture", "format_version")}
    memory = {}
    for batch in BATCHES:
        state = _state_bytes(model.decoder_state_specs(batch, max_length))
        memory[f"batch_{batch}"] = {"decoder_state_bytes": state, "total_bytes": weight_bytes + state}
    return {
        "path": None if path is None else str(path),
        "architecture": model.arch,
        "quantization": getattr(model.config, "quantization", "none"),
        "config": config,
        "parameters": params,
        "weights": {"tensors": len(weights), "bytes": weight_bytes, "dtypes": by_dtype},
        "graphs": {"encoder": _op_counts(model, "encoder"), "decoder_step": _op_counts(model, "decoder_step")},
        "memory": {"max_length": max_length, **memory},
    }


def format_text(info: dict) -> str:
    lines = []
    if info["path"]:
        lines.append(f"model: {info['path']}")
    lines.append(f"architecture: {info['architecture']}")
    lines.append(f"quantization: {info['quantization']}")
    lines.append("config:")
    width = max((len(k) for k in info["config"]), default=0)
    lines += [f"  {k:<{width}} = {v}" for k, v in info["config"].items()]
    w = info["weights"]
    lines.append(f"parameters: {info['parameters']:,}")
    dtypes = ", ".join(f"{name} ({d['parameters']:,} parameters, {_bytes(d['bytes'])})" for name, d in w["dtypes"].items())
    lines.append(f"weights: {w['tensors']} tensors, {w['bytes']:,} bytes ({_bytes(w['bytes'])}); dtype {dtypes}")
    for name, title in (("encoder", "encoder graph"), ("decoder_step", "decoder-step graph")):
        counts = info["graphs"][name]
        lines.append(f"{title}: {sum(counts.values())} nodes")
        lines += [f"  {op} x {n}" for op, n in counts.items()]
    m = info["memory"]
    lines.append(f"memory estimate (weights + decoder state, max_length {m['max_length']}):")
    for batch in BATCHES:
        entry = m[f"batch_{batch}"]
        lines.append(f"  batch {batch:>2}: {_bytes(entry['total_bytes'])} "
                     f"(decoder state {_bytes(entry['decoder_state_bytes'])})")
    return "\n".join(lines)


def run(args) -> int:
    from seqjit.text.translation import load_any

    from seqjit.decoding.options import MAX_LENGTH_LIMIT, DecodingOptions

    if args.kernels:
        from seqjit.graph import kernel_choice

        print("\n".join(kernel_choice.report_lines()))
        return 0
    if args.model is None:
        raise ValueError("inspect needs MODEL (a model directory or a bundled G2P model name), or --kernels")
    if args.max_length is not None and not 1 <= args.max_length <= MAX_LENGTH_LIMIT:
        raise ValueError(f"--max-length must be an integer from 1 to {MAX_LENGTH_LIMIT} (the most seqjit decodes), "
                         f"got {str(args.max_length)[:30]}")
    directory = resolve(args.model)
    model = load_any(directory)
    max_length = args.max_length or DecodingOptions.max_length
    positions = getattr(model.config, "max_positions", None) if getattr(model.config, "positions", "none") != "none" \
        else None
    if positions is not None and max_length > positions:
        if args.max_length is not None:
            raise ValueError(f"--max-length {max_length} exceeds the model's {positions} positions (max_positions)")
        max_length = positions
    info = describe(model, max_length=max_length, path=directory)
    print(json.dumps(info, indent=2) if args.json else format_text(info))
    return 0
