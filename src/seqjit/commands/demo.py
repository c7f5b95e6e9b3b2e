"""``seqjit demo``: the bundled G2P models side by side (phonemes, speed, attention heatmaps);
``seqjit demo --kernel``: blocked attention on a 4096-token input beside naive NumPy."""
from __future__ import annotations

from seqjit.commands.messages import plain


def register(sub) -> None:
    p = sub.add_parser("demo", help="the three bundled G2P models side by side, speeds, attention heatmaps",
                       description=plain(__doc__))
    p.add_argument("words", nargs="*", help="words to show (default: built-in examples)")
    p.add_argument("--png", help="where to write the heatmap PNG, in an existing directory (default: a new private "
                        "seqjit-demo-* folder in the temp dir)")
    p.add_argument("--backend", default=None, help="kernel backend for every op (default: cython, nothing to compile at start-up)")
    p.add_argument("--kernel", action="store_true", help="instead: blocked attention vs naive NumPy, time and memory")
    p.add_argument("--length", type=int, default=4096, help="--kernel: sequence length (default 4096)")
    p.add_argument("--heads", type=int, default=8, help="--kernel: heads")
    p.add_argument("--dim", type=int, default=64, help="--kernel: head dimension")
    p.add_argument("--causal", action="store_true", help="--kernel: causal attention")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.kernel:
        from seqjit.demos.attention_kernel import run_attention_demo

        return run_attention_demo(length=args.length, heads=args.heads, dim=args.dim, causal=args.causal)
    from seqjit.g2p.demo import run_demo

    return run_demo(words=args.words or None, png=args.png, backend=args.backend)
