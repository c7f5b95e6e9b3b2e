"""The ``seqjit`` command line (also ``python -m seqjit``)."""
from __future__ import annotations

import argparse
import sys


def _cmd_demo(args) -> int:
    from seqjit.demo import run_attention_demo

    return run_attention_demo(length=args.length, heads=args.heads, dim=args.dim, causal=args.causal)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seqjit", description=__doc__)
    parser.add_argument("--threads", type=int, default=None, help="threads for Numba, OpenMP and BLAS (default: all cores)")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="blocked attention on a long input beside naive NumPy: time and peak memory")
    demo.add_argument("--length", type=int, default=4096, help="sequence length (default 4096)")
    demo.add_argument("--heads", type=int, default=8)
    demo.add_argument("--dim", type=int, default=64, help="head dimension")
    demo.add_argument("--causal", action="store_true")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads is not None:
        from seqjit import set_num_threads

        set_num_threads(args.threads)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"seqjit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
