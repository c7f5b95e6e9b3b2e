"""The default install has neither scipy (the ``blas`` extra) nor matplotlib (the ``plot`` extra):
each case runs in a fresh process where importing either fails, as in such an install, and checks
that every path that used them still works (or refuses clearly, naming the extra)."""
import json
import subprocess
import sys

from seqjit.g2p import G2P

#: makes ``import scipy`` / ``import matplotlib`` raise ImportError in the child
BLOCK = "import sys; sys.modules['scipy'] = None; sys.modules['matplotlib'] = None\n"


def _child(code, *args):
    return subprocess.run([sys.executable, "-c", BLOCK + code, *args], capture_output=True, text=True, timeout=300)


def test_kernels_and_models_run_without_scipy():
    code = r"""
import json
import numpy as np
import seqjit
from threadpoolctl import threadpool_info
from seqjit import kernels
from seqjit.graph import _native_vm
from seqjit.g2p import G2P
from seqjit.kernels.activations import reference as act_ref
from seqjit.kernels.attention import cython_cpu as attention_cy
from seqjit.kernels.linear import cython_cpu as linear_cy
seqjit.set_num_threads(1)  # numpy's BLAS is limited too, scipy or not
refused = {}
for op in ("linear", "attention"):
    try:
        kernels.get(op, backend="numba")
    except kernels.KernelUnavailable as exc:
        refused[op] = str(exc)
rng = np.random.default_rng(0)
x, w = rng.standard_normal((6, 40)), rng.standard_normal((24, 40))
q, k, v = (rng.standard_normal((1, 2, n, 8)).astype(np.float32) for n in (9, 30, 30))
print(json.dumps({
    "sources": [linear_cy.blas_source(), attention_cy.blas_source(), _native_vm.blas_source()],
    "refused": refused,
    "default_linear": kernels.get("linear") is linear_cy.linear,
    "linear_err": float(np.abs(kernels.get("linear")(x, w) - x @ w.T).max()),
    "attention_err": float(np.abs(kernels.get("attention")(q, k, v) - kernels.get("attention", "reference")(q, k, v)).max()),
    "gelu": act_ref.apply(np.array([-1.0, 0.0, 2.0]), 2).tolist(),
    "phonemes": [p.phonemes for p in G2P("attention").predict(["hello", "transliteration"], beam_size=2)],
    "blas_threads": [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"],
}))
"""
    done = _child(code)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["sources"] == ["fallback"] * 3
    assert set(got["refused"]) == {"linear", "attention"}
    assert all("pip install 'seqjit[blas]'" in msg for msg in got["refused"].values())
    assert got["default_linear"]
    assert got["linear_err"] < 1e-12 and got["attention_err"] < 1e-5
    # GELU(x) = x * Phi(x): Phi(-1) = 0.15865525393145707, Phi(2) = 0.9772498680518208
    assert max(abs(a - b) for a, b in zip(got["gelu"], [-0.15865525393145707, 0.0, 2 * 0.9772498680518208])) < 1e-15
    want = [p.phonemes for p in G2P("attention").predict(["hello", "transliteration"], beam_size=2)]
    assert got["phonemes"] == want
    assert got["blas_threads"] and all(n == 1 for n in got["blas_threads"])


def test_demo_without_matplotlib_prints_and_png_is_refused_naming_the_extra(tmp_path):
    run_cli = "from seqjit.cli import main; sys.exit(main(sys.argv[1:]))"
    png = tmp_path / "heat.png"
    done = _child(run_cli, "demo", "--png", str(png), "hello")
    assert done.returncode == 2 and done.stdout == ""
    assert "needs matplotlib" in done.stderr and "pip install 'seqjit[plot]'" in done.stderr
    assert not png.exists()
    done = _child(run_cli, "demo", "hello")
    assert done.returncode == 0, done.stderr
    assert "Bahdanau attention" in done.stdout
    assert "heatmap PNG: not written (needs matplotlib: pip install 'seqjit[plot]')" in done.stdout
