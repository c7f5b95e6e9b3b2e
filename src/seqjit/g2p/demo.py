"""``seqjit demo``: the three bundled G2P models side by side on example words, their speed, and
attention heatmaps (terminal and PNG) for the two attention models.

The example words mix words the models were trained on, words of the held-out test split and
words not in the CMU dictionary at all (``EXAMPLES``; the tests check these labels against the data).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

#: (word, where it stands in the CMU dictionary split)
EXAMPLES = (
    ("hello", "train"),
    ("pronunciation", "train"),
    ("anthropocentric", "test (unseen)"),
    ("biodegradable", "test (unseen)"),
    ("seqjit", "not in CMUdict"),
    ("transliteration", "not in CMUdict"),
    ("antidisestablishmentarianism", "train"),
    ("supercalifragilisticexpialidocious", "not in CMUdict"),
    ("floccinaucinihilipilification", "not in CMUdict"),
)
HEATMAP_WORD = "transliteration"


def default_png() -> Path:
    """Where the heatmap goes when no ``--png`` is given: a new private directory in the temp dir
    (not one fixed shared path, which another user could have made, or linked elsewhere)."""
    return Path(tempfile.mkdtemp(prefix="seqjit-demo-")) / "attention.png"


def run_demo(*, words=None, png=None, backend=None, out=print) -> int:
    from seqjit.g2p.heatmap import PLOT_HINT, ascii_heatmap, png_available, require_png, save_heatmaps
    from seqjit.g2p.predictor import BUNDLED, DEFAULT_BACKEND, G2P, TITLES

    if png is not None:  # said now, not after the demo ran
        require_png(f"--png {png}")
        if not Path(png).parent.is_dir():  # never created
            raise FileNotFoundError(f"--png {png}: the directory {Path(png).parent} does not exist")
    started = time.perf_counter()
    labels = dict(EXAMPLES) if words is None else {}
    words = [w for w, _ in EXAMPLES] if words is None else list(words)
    heat_word = HEATMAP_WORD if HEATMAP_WORD in words else max(words, key=len)
    rows, results = [], {}
    for name in BUNDLED:
        t0 = time.perf_counter()
        g2p = G2P(name, backend=backend or DEFAULT_BACKEND)
        t1 = time.perf_counter()
        first = g2p.predict(words, return_attention=True)
        t2 = time.perf_counter()
        if not results:
            out(f"first result after {t2 - started:.2f} s (loading and first call included)\n")
        warm = []
        for _ in range(3):
            t = time.perf_counter()
            g2p.predict(words)
            warm.append(time.perf_counter() - t)
        warm_s = sorted(warm)[1]
        params = sum(w.size for w in g2p.model.weights.values())
        rows.append((TITLES[name], params, t1 - t0, t2 - t1, warm_s, len(words) / warm_s))
        results[name] = (g2p, first)

    out("Phonemes (ARPAbet, stress 0/1/2) from each architecture:\n")
    for i, word in enumerate(words):
        tag = f"  [{labels[word]}]" if word in labels else ""
        out(f"{word}{tag}")
        for name in BUNDLED:
            p = results[name][1][i]
            unk = f"   (read as <unk>: {''.join(p.unknown)})" if p.unknown else ""
            out(f"  {TITLES[name]:<20} {' '.join(p.phonemes)}{unk}")
    out("")
    out(f"{'model':<20} {'parameters':>10} {'load':>8} {'first call':>11} {'warm call':>10} {'words/s':>8}")
    for title, params, load_s, first_s, warm_s, wps in rows:
        out(f"{title:<20} {params / 1e6:>9.2f}M {1e3 * load_s:>6.0f} ms {1e3 * first_s:>8.0f} ms "
            f"{1e3 * warm_s:>7.1f} ms {wps:>8.0f}")
    out(f"(a call = all {len(words)} words in one batch, greedy; warm = median of 3)\n")

    panels = []
    index = words.index(heat_word)
    for name in BUNDLED:
        g2p, preds = results[name]
        p = preds[index]
        if p.attention is None:
            continue
        out(f"{TITLES[name]}: which letters of {heat_word!r} each phoneme attended to")
        out(ascii_heatmap(list(heat_word), p.phonemes, p.attention))
        out("")
        panels.append((TITLES[name], list(heat_word), p.phonemes, p.attention))
    if panels and png_available():
        path = save_heatmaps(png or default_png(), panels)
        out(f"heatmap PNG: {path}")
    elif panels:  # the plain demo runs without the plot extra; an explicit --png was refused above
        out(f"heatmap PNG: not written (needs matplotlib: {PLOT_HINT})")
    out(f"total {time.perf_counter() - started:.2f} s; more: seqjit g2p WORD..., seqjit demo --kernel")
    return 0
