"""Export a benchmark model directory (``root/hf``: the decoding benchmark's Marian, or a family of
benchmarks/harness/hf_families.py) to ONNX with ``optimum``, as a new ONNX Runtime user would:
``text2text-generation-with-past`` (encoder_model.onnx, decoder_model.onnx,
decoder_with_past_model.onnx in ``root/onnx``), float32. The directories are written by transformers 5;
optimum's transformers 4.57 reads their config.json and weights as they are (Marian, BART, T5,
M2M100: the benchmarks check every exported model's ids against transformers 5's).

    python benchmarks/decoding/export_onnx.py [--python PY]      # the Marian of the decoding benchmark

The export needs ``optimum-onnx``, which pins transformers < 4.58; it runs in a separate interpreter
(``--python`` or ``$SEQJIT_ORT_EXPORT_PYTHON``, default /work/venvs/ortexport/bin/python), for
example a venv made with::

    python3 -m venv --system-site-packages ortexport
    ortexport/bin/pip install "optimum-onnx" "transformers<4.58"

``export(root)`` returns the export directory, or ``None`` with the reason printed when no
interpreter with optimum is available (the benchmark then skips its ONNX Runtime columns).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

DEFAULT_PYTHON = "/work/venvs/ortexport/bin/python"
FILES = ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx")

#: run by the export interpreter: argv = [hf_dir, out_dir]
_EXPORT = """
import sys
from optimum.exporters.onnx import main_export
main_export(sys.argv[1], output=sys.argv[2], task="text2text-generation-with-past", device="cpu",
            do_validation=False, no_post_process=True)
"""


def export_python(given: str | None = None) -> str:
    return given or os.environ.get("SEQJIT_ORT_EXPORT_PYTHON", DEFAULT_PYTHON)


def export(root: Path, python: str | None = None) -> Path | None:
    """``root/onnx`` holding the three ONNX files (exported once, then cached), or None (reason printed)."""
    out = root / "onnx"
    if all((out / f).exists() for f in FILES):
        return out
    py = export_python(python)
    if not Path(py).exists():
        print(f"== ONNX Runtime skipped: no export interpreter at {py} (set $SEQJIT_ORT_EXPORT_PYTHON or --ort-python "
              "to a python with optimum-onnx; see benchmarks/decoding/export_onnx.py)", flush=True)
        return None
    print(f"== exporting {root / 'hf'} to ONNX with {py} (optimum, text2text-generation-with-past)", flush=True)
    done = subprocess.run([py, "-c", _EXPORT, str(root / "hf"), str(out)], capture_output=True, text=True)
    if done.returncode != 0 or not all((out / f).exists() for f in FILES):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"== ONNX Runtime skipped: the optimum export failed (exit {done.returncode}): {' | '.join(tail)}", flush=True)
        return None
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python", help=f"interpreter with optimum-onnx (default $SEQJIT_ORT_EXPORT_PYTHON or {DEFAULT_PYTHON})")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import workload as w

    out = export(w.prepare_marian(), args.python)
    print(out or "no export")
    return 0 if out else 1


if __name__ == "__main__":
    sys.exit(main())
