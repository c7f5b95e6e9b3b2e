"""Issue 35's host matrix: seqjit against CTranslate2 (the tiny Transformer and Marian at
opus-mt-en-de size: greedy, beam 4, top-k 10, int8) and against a NumPy loop (a G2P-sized GRU), each
engine in its own process at 1 and 2 threads, rounds alternating, the better thread count's median;
optionally the same seqjit cases from another checkout (``--old DIR``: a same-run A/B of two builds).

    python benchmarks/decoding/host_matrix.py [--old ../seqjit-before] [--rounds 2] [--seconds 2]
        [--cases "tiny-greedy:1,64;marian-int8:1,16;gru:1,1024"]

Set ``SEQJIT_ISA=avx2`` (or ``baseline``) to run seqjit's lower variants (the peers ignore it).
Workloads: small_workload.py (tiny, gru) and workload.py (Marian, seeded random weights, 20 tokens).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = "tiny-greedy:1,64;tiny-beam4:1,64;tiny-topk10:1,64;marian-greedy:1,16;marian-beam4:16;marian-int8:1,16;gru:1,1024"
PEER = {"gru": "numpy"}


def engine_run(engine: str, threads: int, work: str):
    """(run(sources), make(batch) -> sources, tokens(batch)) for one engine in this process."""
    sys.path.insert(0, str(HERE))
    if work == "gru" or work.startswith("tiny"):
        import small_workload as sw

        if work == "gru":
            return sw.gru_engine(engine, threads), sw.words, lambda b: b * sw.GRU_NEW
        return sw.tiny_engine(engine, threads, work.split("-")[1]), sw.tiny_sources, lambda b: b * sw.TINY_NEW
    import workload as w

    w.THREADS = threads
    w.set_threads()
    mode = work.split("-")[1]
    tokens = lambda b: b * w.NEW_TOKENS  # noqa: E731
    if mode != "int8":
        run = w.marian_engine(engine)
        beam = 4 if mode == "beam4" else 1
        return (lambda srcs: run(srcs, beam)), w.sources, tokens
    root = w.prepare_marian()
    if engine == "seqjit":
        import seqjit

        qdir = root / "seqjit_int8"
        if not (qdir / "model.safetensors").exists():
            seqjit.quantize(seqjit.convert.from_hf(root / "hf"), "int8").save(qdir)
        model = seqjit.load(qdir)
        return (lambda srcs: model.generate(srcs, max_length=w.NEW_TOKENS, min_length=w.NEW_TOKENS,
                                            max_batch_size=len(srcs))), w.sources, tokens
    import ctranslate2

    tr = ctranslate2.Translator(str(root / "ct2"), device="cpu", compute_type="int8", intra_threads=threads,
                                inter_threads=1)
    return (lambda srcs: tr.translate_batch([w.token_names(s) for s in srcs], max_batch_size=len(srcs),
                                            min_decoding_length=w.NEW_TOKENS,
                                            max_decoding_length=w.NEW_TOKENS)), w.sources, tokens


def one(engine: str, threads: int, work: str, batches: list, seconds: float) -> dict:
    """The child process: tokens (words for the GRU) per second, median of calls over ``seconds``."""
    run, make, tokens = engine_run(engine, threads, work)
    out = {"load": os.getloadavg()[0]}
    for b in batches:
        srcs = make(b)
        run(srcs)
        times, end = [], time.perf_counter() + seconds
        while time.perf_counter() < end or len(times) < 5:
            t0 = time.perf_counter()
            run(srcs)
            times.append(time.perf_counter() - t0)
        out[str(b)] = tokens(b) / statistics.median(times)
    return out


def spawn(checkout: Path, engine: str, threads: int, work: str, batches: str, seconds: float) -> dict:
    env = dict(os.environ, SEQJIT_BENCH_THREADS=str(threads))
    if engine != "seqjit":
        env.pop("OMP_WAIT_POLICY", None)
    if checkout != HERE.parents[1]:  # another checkout's seqjit (its in-place build: src/ on the path)
        env["PYTHONPATH"] = str(checkout / "src")
    script = checkout / "benchmarks" / "decoding" / "host_matrix.py"
    if not script.exists():
        script = Path(__file__)
    r = subprocess.run([sys.executable, str(script), "--one", engine, str(threads), work, batches, str(seconds)],
                       env=env, capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"{engine} {work} at {threads} threads failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--one":
        engine, threads, work, batches, seconds = argv[1:6]
        print(json.dumps(one(engine, int(threads), work, [int(b) for b in batches.split(",")], float(seconds))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default=CASES)
    p.add_argument("--old", type=Path, help="another checkout (built in place) to run seqjit from as well")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from workload import cpu_name

    print(f"CPU: {cpu_name()}; SEQJIT_ISA={os.environ.get('SEQJIT_ISA', '(unset)')}")
    for case in args.cases.split(";"):
        work, batches = case.split(":")
        peer = PEER.get(work.split("-")[0], "ctranslate2")
        runners = [("seqjit", HERE.parents[1], "seqjit")] + ([("before", args.old.resolve(), "seqjit")] if args.old else [])
        runners.append((peer, HERE.parents[1], peer))
        rates, loads = {}, []
        for _ in range(args.rounds):
            for name, checkout, engine in runners:
                for t in (1, 2):
                    o = spawn(checkout, engine, t, work, batches, args.seconds)
                    loads.append(o["load"])
                    for b in batches.split(","):
                        rates.setdefault((name, b, t), []).append(o[b])
        print(f"\n{work}: {args.rounds} rounds, load {min(loads):.1f}-{max(loads):.1f}; median tok/s (threads)")
        names = [r[0] for r in runners]
        print("| batch | " + " | ".join(names) + " | " + " | ".join(f"seqjit / {n}" for n in names[1:]) + " |")
        print("|---:|" + "---:|" * (2 * len(names) - 1))
        for b in batches.split(","):
            best = {}
            for n in names:
                per = {t: statistics.median(rates[(n, b, t)]) for t in (1, 2)}
                t = max(per, key=per.get)
                best[n] = (per[t], t)
            cells = " | ".join(f"{best[n][0]:,.0f} ({best[n][1]})" for n in names)
            ratios = " | ".join(f"{best['seqjit'][0] / best[n][0]:.2f}x" for n in names[1:])
            print(f"| {b} | {cells} | {ratios} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
