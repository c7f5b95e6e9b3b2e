"""The roofline picture of decode_shapes.py's results: GFLOP/s against arithmetic intensity (flop
per byte of weight, x and y), with this host's measured FMA peak and read bandwidth as the roof;
seqjit (circles, solid), NumPy/BLAS (crosses, dashed), ONNX Runtime's MatMul (triangles, dotted,
where the results have it).

    python benchmarks/gemm/roofline_plot.py results.json out.png
"""
from __future__ import annotations

import json
import sys


def intensity(r: dict) -> float:
    m, k, n = r["M"], r["K"], r["N"]
    return 2.0 * m * k * n / (4.0 * (k * n + m * k + m * n))


def plot(data: dict, png: str, mode: str = "stream") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    roof = data["roofline"]
    threads = sorted({r["threads"] for r in data["rows"]})
    fig, axes = plt.subplots(1, len(threads), figsize=(6.5 * len(threads), 5), squeeze=False)
    for ax, t in zip(axes[0], threads):
        rows = [r for r in data["rows"] if r["threads"] == t and r["mode"] == mode]
        peak, bw = roof[f"peak_{t}t"], roof[f"read_{t}t"]
        ai = np.logspace(-1, 3, 200)
        ax.loglog(ai, np.minimum(peak, bw * ai), "k-", lw=1.5, label=f"roof: {peak:.0f} GFLOP/s, {bw:.1f} GB/s")
        ax.loglog(ai, 0.7 * np.minimum(peak, bw * ai), "k:", lw=1, label="70% of the roof")
        shapes = sorted({(r["K"], r["N"]) for r in rows})
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (k, n) in enumerate(shapes):
            sel = sorted((r for r in rows if (r["K"], r["N"]) == (k, n)), key=lambda r: r["M"])
            x = [intensity(r) for r in sel]
            c = colors[i % len(colors)]
            ax.loglog(x, [r["native_gflops"] for r in sel], "o-", color=c, label=f"seqjit {k}x{n}")
            ax.loglog(x, [r["blas_gflops"] for r in sel], "x--", color=c, alpha=0.6, label=f"BLAS {k}x{n}")
            if all(r.get("ort_gflops") for r in sel):
                ax.loglog(x, [r["ort_gflops"] for r in sel], "^:", color=c, alpha=0.6, label=f"ONNX Runtime {k}x{n}")
            for r, xi in zip(sel, x):
                ax.annotate(f"M={r['M']}", (xi, r["native_gflops"]), fontsize=6, xytext=(3, -8), textcoords="offset points")
        ax.set_xlabel("flop per byte (weight + x + y)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{data.get('cpu', '')}\n{t} thread{'s' if t > 1 else ''}, weights from memory", fontsize=9)
        ax.set_ylim(1, peak * 2)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    plot(json.load(open(sys.argv[1])), sys.argv[2])
