"""The instruction set seqjit's CPU kernels run: the CPU's best, or lower with ``SEQJIT_ISA``.

``SEQJIT_ISA=avx512|avx2|baseline`` caps every native kernel family: the C dispatchers
(``kernels/_runtime/isa_cap.h``: linear, activations, the replay VM, the BLAS fallback, attention
tiles, int8, rnn, additive attention) take the lower of the CPU's best and the cap; a cap above
the CPU's best means the CPU's best. The variable is read by each extension at its first dispatch,
so set it before the process starts (changing it afterwards is not seen). An unknown value raises
:class:`~seqjit.errors.ConfigError` when ``seqjit.kernels`` is imported.

Numba compiles for the host CPU: when the cap is below what the CPU has (from its flags in
``/proc/cpuinfo``; elsewhere: always) and the user set neither ``NUMBA_CPU_NAME`` nor
``NUMBA_CPU_FEATURES``, :func:`configure` sets them (``haswell`` for avx2, ``generic`` for baseline,
features those of the name) before Numba is imported; if Numba was imported already it warns.
Likewise OpenBLAS (scipy's, which the Cython linear and attention kernels call): unless the user set
``OPENBLAS_CORETYPE`` or scipy's BLAS is loaded already, it is set to the capped core (``Haswell`` for
avx2, ``Nehalem``, SSE4.2 without AVX, for baseline: the lowest core scipy's OpenBLAS
builds), so a capped process runs no AVX-512 BLAS code either (NumPy's own
OpenBLAS, loaded before seqjit, keeps the host's).
"""
from __future__ import annotations

import os
import sys
import warnings

ENV = "SEQJIT_ISA"
#: the levels, best first (the names the C side reports: isa_cap.h's sj_isa_name)
ISAS = ("avx512", "avx2", "baseline")
#: the LLVM CPU Numba targets under a cap
NUMBA_CPU = {"avx2": "haswell", "baseline": "generic"}
#: OpenBLAS's core under a cap (OPENBLAS_CORETYPE, read once, when scipy's OpenBLAS loads)
OPENBLAS_CORE = {"avx2": "Haswell", "baseline": "Nehalem"}


def requested() -> str | None:
    """``$SEQJIT_ISA`` (None when unset or empty); ConfigError for another value than ISAS."""
    value = os.environ.get(ENV, "")
    if value == "":
        return None
    if value not in ISAS:
        from seqjit.errors import ConfigError

        raise ConfigError(f"{ENV} must be one of {', '.join(ISAS)} (or unset), got {value[:30]!r}")
    return value


def _cpu_best() -> str | None:
    """The best level by /proc/cpuinfo's flags (as isa_cap.h's sj_isa_cpu), None where unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
            else:
                return None
    except OSError:
        return None
    if not {"avx2", "fma"} <= flags:
        return "baseline"
    return "avx512" if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags else "avx2"


def configure() -> str | None:
    """Check ``$SEQJIT_ISA`` and point Numba at the capped CPU (module docstring); returns the cap."""
    cap = requested()
    if cap is None or cap == "avx512":
        return cap
    best = _cpu_best()
    if best is not None and ISAS.index(best) >= ISAS.index(cap):
        return cap  # the CPU's best is at or below the cap: nothing to lower
    if "OPENBLAS_CORETYPE" not in os.environ and not any(m.startswith("scipy.linalg") for m in sys.modules):
        os.environ["OPENBLAS_CORETYPE"] = OPENBLAS_CORE[cap]
    if "NUMBA_CPU_NAME" in os.environ or "NUMBA_CPU_FEATURES" in os.environ:
        return cap  # the user's choice
    if "numba" in sys.modules:
        warnings.warn(f"{ENV}={cap}: Numba was imported before seqjit, so its kernels target the host CPU; "
                      f"set {ENV} before starting Python, or NUMBA_CPU_NAME={NUMBA_CPU[cap]}",
                      RuntimeWarning, stacklevel=3)
        return cap
    os.environ["NUMBA_CPU_NAME"] = NUMBA_CPU[cap]
    os.environ["NUMBA_CPU_FEATURES"] = ""
    return cap


def isa() -> str:
    """The instruction set the native kernels run here: "avx512", "avx2" or "baseline" (the C side's
    answer: the linear kernels' BLAS fallback, whose level every family computes alike)."""
    from seqjit.kernels.linear import cython_cpu

    return cython_cpu.blas_fallback_isa()


def by_family() -> dict:
    """Each Cython kernel family's variant in use, asked of its C dispatcher (tests, ``inspect``; the
    replay VM's is ``seqjit.graph._native_vm.linear_isa()``), named as in ISAS."""
    from seqjit.kernels.additive_attention import cython_cpu as additive
    from seqjit.kernels.attention import cython_cpu as attention
    from seqjit.kernels.linear_int8 import cython_cpu as int8
    from seqjit.kernels.rnn import cython_cpu as rnn
    from seqjit.kernels.rnn_int8 import cython_cpu as rnn_int8

    names = {"avx512f": "avx512", "portable": "baseline", "avx512_vnni": "avx512"}
    got = {"blas_fallback": isa(), "attention": attention.SIMD, "linear_int8": int8.isa(),
           "rnn_int8": rnn_int8.isa(), "rnn": rnn.isa(), "additive_attention": additive.isa()}
    return {family: names.get(name, name) for family, name in got.items()}
