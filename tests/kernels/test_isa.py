"""SEQJIT_ISA caps every native kernel family (kernels/_runtime/isa_cap.h, kernels/_isa.py): a fresh
process under each cap the host can run reports that level from every C dispatcher, and Numba
compiles for the capped CPU."""
import json
import os
import subprocess
import sys

import pytest

from seqjit.errors import ConfigError
from seqjit.kernels import _isa

# run in a fresh process (the variable is read at each extension's first dispatch): every family's
# variant, the replay VM's, the kernels' accessor, and whether Numba's code for a float loop uses
# 256-bit (ymm) or 512-bit (zmm) registers
PROBE = r"""
import json, os
import numpy as np
import seqjit.kernels as kernels
from seqjit.kernels import _isa
from seqjit.graph import _native_vm
import numba
import threadpoolctl
import scipy.linalg  # scipy's OpenBLAS, loaded after seqjit as the Cython kernels load it

@numba.njit
def axpy(a, x, y):
    for i in range(x.shape[0]):
        y[i] += a * x[i]

x = np.ones(64, np.float32)
axpy(np.float32(2), x, x.copy())
asm = next(iter(axpy.inspect_asm().values()))
print(json.dumps({"families": _isa.by_family(), "vm": _native_vm.isa(), "isa": kernels.isa(),
                  "numba_cpu": os.environ.get("NUMBA_CPU_NAME"), "ymm": "ymm" in asm, "zmm": "zmm" in asm,
                  "blas": sorted({i.get("architecture") for i in threadpoolctl.threadpool_info()
                                  if i["internal_api"] == "openblas" and "scipy_openblas-" in i["filepath"]})}))
"""

VM_NAMES = {"base": "baseline"}


def probe(cap):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEQJIT_ISA", "NUMBA_CPU", "OPENBLAS_CORETYPE"))}
    if cap is not None:
        env["SEQJIT_ISA"] = cap
    env["NUMBA_CACHE_DIR"] = ""  # nothing cached: the code is compiled for this process's target
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def uncapped():
    return probe(None)


def test_uncapped_is_the_cpus_best(uncapped):
    """With no cap every family runs the CPU's best (the C side's detection agrees with the flags)."""
    best = _isa._cpu_best()
    assert uncapped["isa"] == best
    assert set(uncapped["families"].values()) - {"avx2"} <= {best}  # int8 without VNNI: avx2 on AVX-512
    assert VM_NAMES.get(uncapped["vm"], uncapped["vm"]) == best
    assert uncapped["numba_cpu"] is None


def lower(a, b):
    return _isa.ISAS[max(_isa.ISAS.index(a), _isa.ISAS.index(b))]


@pytest.mark.parametrize("cap", ["baseline", "avx2", "avx512"])
def test_every_family_honours_the_cap(uncapped, cap):
    """Each family runs the lower of its uncapped variant and the cap (a cap above the CPU's best:
    the CPU's best); Numba targets the capped CPU only when the cap is below the CPU's best."""
    best = uncapped["isa"]
    want = lower(cap, best)
    got = probe(cap)
    assert got["isa"] == want
    assert got["families"] == {f: lower(v, want) for f, v in uncapped["families"].items()}, got["families"]
    assert VM_NAMES.get(got["vm"], got["vm"]) == want
    if want == best:
        assert got["numba_cpu"] is None and got["ymm"] == uncapped["ymm"] and got["zmm"] == uncapped["zmm"]
        assert got["blas"] == uncapped["blas"]
    else:  # no vector register wider than the cap in Numba's code, scipy's OpenBLAS on the capped core
        assert got["numba_cpu"] == _isa.NUMBA_CPU[want]
        assert not got["zmm"] and (want == "avx2" or not got["ymm"])
        assert got["blas"] in ([], [_isa.OPENBLAS_CORE[want]]), got["blas"]


@pytest.mark.parametrize("value", ["sse9", "AVX2", " avx2", "avx-512"])
def test_an_unknown_value_is_a_config_error(monkeypatch, value):
    monkeypatch.setenv("SEQJIT_ISA", value)
    with pytest.raises(ConfigError, match=r"SEQJIT_ISA must be one of avx512, avx2, baseline"):
        _isa.configure()


def test_numba_imported_first_warns(monkeypatch):
    import numba  # noqa: F401 - imported before the cap is configured

    monkeypatch.setenv("SEQJIT_ISA", "baseline")
    monkeypatch.delenv("NUMBA_CPU_NAME", raising=False)
    monkeypatch.delenv("NUMBA_CPU_FEATURES", raising=False)
    monkeypatch.setattr(_isa, "_cpu_best", lambda: "avx2")
    with pytest.warns(RuntimeWarning, match="Numba was imported before seqjit"):
        assert _isa.configure() == "baseline"
    assert "NUMBA_CPU_NAME" not in os.environ


def test_the_users_numba_cpu_is_kept(monkeypatch):
    monkeypatch.setenv("SEQJIT_ISA", "baseline")
    monkeypatch.setenv("NUMBA_CPU_NAME", "haswell")
    monkeypatch.setattr(_isa, "_cpu_best", lambda: "avx2")
    assert _isa.configure() == "baseline"
    assert os.environ["NUMBA_CPU_NAME"] == "haswell"
