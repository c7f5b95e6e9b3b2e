"""Word error rate against word length for the three bundled G2P models (Bahdanau et al. 2014, fig. 2,
on G2P): the CMUdict test split, greedy decoding with seqjit.

    python benchmarks/g2p/wer_by_length.py        # writes benchmarks/results/g2p_wer_by_length.{md,png}

Also stores each model's test-set counts in its g2p.json ("evaluation"), which docs/g2p.md quotes and
a slow test (tests/g2p/test_bundled_models.py) recomputes.
"""
from __future__ import annotations

import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import seqjit
from seqjit.g2p import BUNDLED, G2P
from seqjit.g2p.evaluate import evaluate, markdown_table, plot
from seqjit.g2p.predictor import TITLES
from seqjit.g2p.vocab import G2P_FILE

RESULTS = Path(__file__).resolve().parents[1] / "results"


def record(g2p, e) -> None:
    path = g2p.directory / G2P_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    data["evaluation"] = dict(split=e.split, words=e.overall.words, wrong_words=e.overall.wrong_words,
                              edits=e.overall.edits, phonemes=e.overall.phonemes,
                              wer=round(e.overall.wer, 4), per=round(e.overall.per, 4))
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    seqjit.set_num_threads(2)
    start = time.perf_counter()
    evaluations = []
    for name in BUNDLED:
        g2p = G2P(name)
        e = evaluate(g2p, "test")
        e.model = TITLES[name]
        record(g2p, e)
        evaluations.append(e)
        print(f"{e.model}: PER {100 * e.overall.per:.2f}%, WER {100 * e.overall.wer:.2f}% on {e.overall.words} words")
    RESULTS.mkdir(exist_ok=True)
    png = RESULTS / "g2p_wer_by_length.png"
    plot(evaluations, png)
    summary = "\n".join(f"| {e.model} | {100 * e.overall.per:.2f}% | {100 * e.overall.wer:.2f}% |" for e in evaluations)
    text = f"""# G2P: word error rate against word length (CMUdict test split)

- Command: `python benchmarks/g2p/wer_by_length.py` ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {time.perf_counter() - start:.0f} s)
- Machine: {platform.machine()}, {platform.processor() or platform.platform()}; seqjit {seqjit.__version__}, 2 threads
- Models: the bundled `gru` (vanilla GRU seq2seq: the encoder's final state alone starts the decoder),
  `attention` (Bahdanau) and `transformer`, greedy decoding with seqjit. A word counts as right when
  the prediction equals any of its listed pronunciations (stress included); PER against the closest one.

| model | PER | WER |
|---|---:|---:|
{summary}

{markdown_table(evaluations)}

![WER by word length](g2p_wer_by_length.png)
"""
    (RESULTS / "g2p_wer_by_length.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
