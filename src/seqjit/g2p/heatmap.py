"""Attention heatmaps: which letters each phoneme attended to, as text (terminal) and as a PNG.

Rows are phonemes, columns letters; a cell's shade is the weight (0 to 1) the model put on that
letter while producing that phoneme.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

SHADES = " .:-=+*#%@"


def ascii_heatmap(letters, phonemes, weights) -> str:
    """The weights ``[len(phonemes), len(letters)]`` as rows of shade characters (``@`` near 1)."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (len(phonemes), len(letters)):
        raise ValueError(f"weights must have shape [{len(phonemes)}, {len(letters)}] (phonemes x letters), "
                         f"got {list(weights.shape)}")
    width = max((len(p) for p in phonemes), default=0)
    levels = np.clip((weights * (len(SHADES) - 1)).round().astype(int), 0, len(SHADES) - 1)
    lines = [" " * (width + 1) + " ".join(letters)]
    for phoneme, row in zip(phonemes, levels):
        lines.append(f"{phoneme:>{width}} " + " ".join(SHADES[v] for v in row))
    return "\n".join(lines)


#: how to install what PNG output needs
PLOT_HINT = "pip install 'seqjit[plot]'"


def png_available() -> bool:
    """True when matplotlib (the optional ``plot`` extra) can be imported, so PNGs can be written."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a broken or blocked matplotlib entry in sys.modules
        return False


def require_png(what: str = "writing a PNG heatmap") -> None:
    """Raise ModuleNotFoundError naming the ``plot`` extra unless matplotlib is installed."""
    if not png_available():
        raise ModuleNotFoundError(f"{what} needs matplotlib, which is not installed: {PLOT_HINT}")


def save_heatmaps(path, panels) -> Path:
    """Write one PNG with a heatmap per panel: ``(title, letters, phonemes, weights)``. Needs matplotlib
    (the ``plot`` extra)."""
    require_png()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)  # its directory must exist: a mistyped path is not created silently
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4.5), squeeze=False)
    for ax, (title, letters, phonemes, weights) in zip(axes[0], panels):
        ax.imshow(np.asarray(weights), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(letters)), list(letters))
        ax.set_yticks(range(len(phonemes)), list(phonemes))
        ax.set_xlabel("letters")
        ax.set_ylabel("phonemes")
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
