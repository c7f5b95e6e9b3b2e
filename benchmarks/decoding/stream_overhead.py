"""What streaming costs per token: ``generate_stream`` (a native step per token, Python wrapping each
token) against native greedy ``generate`` (every token in one native call) and against the Python
loop that streamed before (``greedy_search``), one source, ``N`` forced tokens.

    python benchmarks/decoding/stream_overhead.py [--tokens 32] [--rounds 200] [--threads 1]

Models: the tiny Transformer of small_workload.py and the bundled G2P GRU. Prints the median
microseconds per token of each way and the stream's overhead per token over native greedy.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def models():
    import seqjit
    import small_workload
    from seqjit.g2p import G2P

    tiny = seqjit.from_hf(small_workload.prepare_tiny() / "hf")
    gru = G2P("gru").model
    return {"tiny transformer": (tiny, small_workload.tiny_sources(1)[0]), "g2p gru": (gru, [5, 9, 12, 7, 3, 20])}


def per_token(fn, tokens: int, rounds: int) -> float:
    """Median microseconds per token of ``fn()`` (which makes ``tokens`` tokens)."""
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / tokens * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    import seqjit
    from seqjit.decoding import api

    seqjit.set_num_threads(args.threads)
    n = args.tokens
    forced = dict(max_length=n, min_length=n)
    cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if l.startswith("Model name")), "?")
    print(f"{cpu}, {args.threads} thread(s), {n} tokens per call, median of {args.rounds} calls; us per token")
    print("| model | mode | native generate | native stream | Python-loop stream | stream overhead per token |")
    print("|---|---|---:|---:|---:|---:|")
    for name, (model, src) in models().items():
        for mode, extra in (("greedy", {}), ("top-k 10", dict(sampling_topk=10, seed=1))):
            opts = {**forced, **extra}

            def stream():
                for tok in model.generate_stream(src, **opts):
                    pass

            def python_stream():
                real = api.native_stream
                api.native_stream = lambda *a: None
                try:
                    stream()
                finally:
                    api.native_stream = real
            assert [t.token for t in model.generate_stream(src, **opts)] == model.generate([src], **opts)[0].ids[0]
            whole = per_token(lambda: model.generate([src], **opts), n, args.rounds)
            native = per_token(stream, n, args.rounds)
            loop = per_token(python_stream, n, max(20, args.rounds // 5))
            print(f"| {name} | {mode} | {whole:.1f} | {native:.1f} | {loop:.1f} | {native - whole:+.1f} |")


if __name__ == "__main__":
    main()
