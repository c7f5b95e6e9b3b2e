"""seqjit.kernels: every kernel seqjit runs, one folder per family, backends side by side.

Each family folder ``kernels/<family>/`` holds:

- ``spec.py``        argument checks and output allocation, shared by every backend (validate before
                     entering jitted code: jitted code does no bounds checks);
- ``reference.py``   the NumPy reference: the readable specification of the ops;
- ``numba_cpu.py``   Numba CPU kernels;
- ``cython_cpu.pyx`` Cython CPU kernels (compiled at install, OpenMP when available);
- ``cuda.py``        numba.cuda kernels (imported only when the ``cuda`` backend is asked for).

Every backend module exposes the family's ops under the same names and signatures. Use
:func:`get` to pick one::

    from seqjit import kernels
    softmax = kernels.get("softmax")                 # fastest available CPU backend
    attention = kernels.get("attention", backend="numba")
    kernels.backends("attention")                    # e.g. ["cython", "numba", "reference"]

:func:`isa` names the instruction set the native kernels run: the CPU's best, or lower under
``SEQJIT_ISA=avx512|avx2|baseline`` (``_isa.py``), for running and testing every variant on one host.

The ``native`` backend is the native replay's kernels (the families' ``_native.pxi``), each op run
as a one-node lowered graph (:mod:`seqjit.graph.native_backend`): for testing them as kernels; it is
never picked by default.
"""
from __future__ import annotations

import importlib
from functools import lru_cache

from seqjit.errors import KernelUnavailable  # defined below both (errors is the bottom layer)

from ._isa import configure as _configure_isa, isa
from ._numba_cache import configure as _configure_numba_cache

__all__ = ["get", "backends", "ops", "isa", "BACKENDS", "OPS", "KernelUnavailable"]

_configure_isa()  # $SEQJIT_ISA checked, and Numba's target CPU set under a cap, before Numba loads (_isa.py)
_configure_numba_cache()  # before any kernel module defines a jitted function (see _numba_cache.py)

#: op name -> family folder
OPS: dict[str, str] = {
    "softmax": "softmax",
    "log_softmax": "softmax",
    "attention": "attention",
    "additive_attention": "additive_attention",
    "gru": "rnn",
    "lstm": "rnn",
    "gru_cell": "rnn",
    "lstm_cell": "rnn",
    "layer_norm": "layer_norm",
    "linear": "linear",
    "linear_int8": "linear_int8",
    "quantize_int8": "linear_int8",
    "matmul_int8": "linear_int8",
    "linear_half": "linear_half",
    "embedding_half": "linear_half",
    "widen_half": "linear_half",
    "narrow_half": "linear_half",
    "gru_recurrence_int8": "rnn_int8",
    "lstm_recurrence_int8": "rnn_int8",
    "relu": "activations",
    "gelu": "activations",
    "silu": "activations",
    "tanh": "activations",
    "embedding": "embedding",
    "sinusoidal_positions": "embedding",
    "greedy_argmax": "decode_step",
    "beam_topk": "beam",
    "beam_advance": "beam",
}

#: backend name -> module file name inside a family folder, or (a dotted name) the one module of a backend
#: that lives above the kernels: the native kernels run inside the replay VM, so their backend is the
#: graph's :mod:`seqjit.graph.native_backend` (found by name, as a device's runtime is: no import upward)
BACKENDS: dict[str, str] = {
    "reference": "reference",
    "numba": "numba_cpu",
    "cython": "cython_cpu",
    "cuda": "cuda",
    "native": "seqjit.graph.native_backend",
}

#: the order in which the default CPU backend is chosen, per op (fastest first, from
#: benchmarks/RESULTS.md); ops not listed use _DEFAULT_ORDER.
_DEFAULT_ORDER = ("numba", "cython", "reference")
_CYTHON_FIRST = ("cython", "numba", "reference")
PREFERRED: dict[str, tuple[str, ...]] = {
    # within a few % of Numba (benchmarks/RESULTS.md), and no compile wait at start-up: Numba's cold
    # first call costs ~5 s (attention, additive attention) to ~13 s (each recurrent op)
    "attention": _CYTHON_FIRST,
    "additive_attention": _CYTHON_FIRST,
    "gru": _CYTHON_FIRST,
    "lstm": _CYTHON_FIRST,
    "gru_cell": _CYTHON_FIRST,
    "lstm_cell": _CYTHON_FIRST,
    # computed once per model build (constant-folded): a Numba compile there only delays start-up
    "sinusoidal_positions": _CYTHON_FIRST,
    # int8: the Cython kernels use AVX512-VNNI / AVX2 instructions LLVM does not pick for Numba's loops
    "linear_int8": _CYTHON_FIRST,
    "quantize_int8": _CYTHON_FIRST,
    "matmul_int8": _CYTHON_FIRST,
    "gru_recurrence_int8": _CYTHON_FIRST,
    "lstm_recurrence_int8": _CYTHON_FIRST,
    # the C step the native beam search runs (kernels/beam/_native.pxi)
    "beam_topk": _CYTHON_FIRST,
    "beam_advance": _CYTHON_FIRST,
}


def ops() -> list[str]:
    """All op names the registry knows."""
    return sorted(OPS)


def _family(name: str) -> str:
    try:
        return OPS[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; known kernels: {', '.join(ops())}") from None


@lru_cache(maxsize=None)
def _module(family: str, backend: str):
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known backends: {', '.join(BACKENDS)}")
    if backend == "cuda":
        from seqjit.kernels._cuda import require_cuda

        require_cuda()
    module = BACKENDS[backend]
    try:
        return importlib.import_module(module if "." in module else f"seqjit.kernels.{family}.{module}")
    except ImportError as exc:
        raise KernelUnavailable(f"backend {backend!r} of kernel family {family!r} is not available: {exc}") from exc


def get(name: str, backend: str | None = None):
    """Return the function implementing op ``name`` on ``backend``.

    ``backend=None`` picks the fastest CPU backend available here. Raises ``ValueError`` for an
    unknown op or backend and :class:`KernelUnavailable` when the backend cannot run here.
    """
    family = _family(name)
    if backend is None:
        for candidate in PREFERRED.get(name, _DEFAULT_ORDER):
            try:
                return getattr(_module(family, candidate), name)
            except (KernelUnavailable, AttributeError):
                continue
        raise KernelUnavailable(f"no CPU backend of {name!r} is available")
    module = _module(family, backend)
    try:
        return getattr(module, name)
    except AttributeError:
        raise KernelUnavailable(f"backend {backend!r} does not implement {name!r}") from None


def backends(name: str) -> list[str]:
    """The backends of op ``name`` that can run on this machine."""
    family = _family(name)
    found = []
    for backend in BACKENDS:
        try:
            if hasattr(_module(family, backend), name):
                found.append(backend)
        except KernelUnavailable:
            continue
    return found
