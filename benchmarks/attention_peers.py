"""Peer attention engines for :func:`seqjit.demos.attention_kernel.run_engine` (``"attention_peers:torch_sdpa"``):
they live here, outside the package, because the installed seqjit never imports torch.

Run as a script, seqjit's CPU attention against torch SDPA (default backend), float32, each engine in
its own process at 1 and 2 threads (its best counts), the engines' order alternating round by round;
medians over the rounds of each round's ratio::

    python benchmarks/attention_peers.py --lengths 512,1024,2048 --decode 10,64,256 --decode-batch 1,16 \\
        --rounds 3 [--old OTHER_CHECKOUT/src] [--causal]

Self-attention cases are ``[1, H, L, D]``; decode cases one query over ``Lk`` keys at each batch.
``--old`` adds the seqjit found there (its ``src`` folder, built; its
``seqjit.demos.attention_kernel.measure`` must take ``queries`` and ``batch``: copy this checkout's
file over an older one) as a third engine, for a same-run A/B of a change. GFLOP/s counts ``4 B H Lq Lk D`` (both products; causal counted whole).
"""
import argparse
import os
import statistics
import sys


def torch_sdpa():
    """(callable(q, k, v, causal) -> array, label): torch's scaled_dot_product_attention at
    ``SEQJIT_DEMO_THREADS`` threads."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(int(os.environ.get("SEQJIT_DEMO_THREADS", "1")))

    def run(q, k, v, causal):
        t = [torch.from_numpy(x) for x in (q, k, v)]
        return F.scaled_dot_product_attention(*t, is_causal=causal).numpy()

    return run, "torch SDPA"


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=_ints, default=[512, 1024, 2048])
    parser.add_argument("--decode", type=_ints, default=[10, 64, 256], help="key counts of the decode cases")
    parser.add_argument("--decode-batch", type=_ints, default=[1, 16])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=_ints, default=[1, 2])
    parser.add_argument("--old", help="another checkout's src folder: its seqjit as a third engine")
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(here), "src")
    sys.path.insert(0, src)
    from seqjit.demos.attention_kernel import run_engine

    engines = {"seqjit": ("cython", src), "sdpa": ("attention_peers:torch_sdpa", here)}
    if args.old:
        engines["seqjit-old"] = ("cython", args.old)
    cases = [(1, L, L) for L in args.lengths] + [(b, 1, lk) for b in args.decode_batch for lk in args.decode]
    times = {}  # (case, engine) -> [best over threads, per round]
    for rnd in range(args.rounds):
        names = list(engines) if rnd % 2 == 0 else list(engines)[::-1]
        for case in cases:
            B, Lq, Lk = case
            for name in names:
                engine, path = engines[name]
                best = min(run_engine(engine, Lk, args.heads, args.dim, args.causal, threads=t,
                                      path=os.pathsep.join([path, here]), queries=Lq, batch=B)["warm_s"]
                           for t in args.threads)
                times.setdefault((case, name), []).append(best)
        print(f"round {rnd + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    others = [n for n in engines if n != "sdpa"]
    head = ["case", *[f"{n} ms (GFLOP/s)" for n in engines], *[f"{n} / SDPA" for n in others]]
    if args.old:
        head.append("seqjit / seqjit-old")
    print(f"float32, H {args.heads}, D {args.dim}, causal {args.causal}; best of threads {args.threads}, "
          f"medians of {args.rounds} alternating rounds (ratios: speed, median of the rounds' ratios)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for case in cases:
        B, Lq, Lk = case
        flop = 4.0 * B * args.heads * Lq * Lk * args.dim
        row = [f"B{B} Lq{Lq} Lk{Lk}"]
        for n in engines:
            t = statistics.median(times[(case, n)])
            row.append(f"{t * 1e3:.3f} ({flop / t / 1e9:.1f})")
        ratio = lambda a, b: statistics.median(x / y for x, y in zip(times[(case, b)], times[(case, a)]))  # noqa: E731
        row += [f"{ratio(n, 'sdpa'):.2f}x" for n in others]
        if args.old:
            row.append(f"{ratio('seqjit', 'seqjit-old'):.2f}x")
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
