"""Which native linear kernel runs a product of a given shape on this host: chosen by measurement.

A native linear of M rows reads its weight either as stored (the dot-product GEMV up to 4 rows, the
row-block GEMV past them) or packed in panels (kernels/linear/packed.py). Which is faster depends on
the host (cache sizes, vector width, memory bandwidth), so instead of a threshold tuned on one machine
the lowering asks :func:`choose` (M, K, N): the first time a shape class is met, both kernels run
it as one-op native programs on the calling thread (a weight of the class's K and up to 4096
columns, read from L3 or memory: 16 MB are written before each call; interleaved, best of a few
calls, 0.05-0.5 s), and the faster is kept (the fixed choice unless the other is MARGIN faster),
in memory and in ``kernel_choice.json`` under the user cache directory (``$SEQJIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/seqjit``, else ``~/.cache/seqjit``). The file is keyed by the seqjit version, the
native VM's build and the CPU model string: another version, build or CPU, a file that does not
parse or is not a regular file (a FIFO or a link to a device is not read), or a malformed entry,
means measuring again (never an error). Each entry is also keyed by the instruction-set variant the
VM's kernels run (:func:`isa`: the CPU's best, or lower under ``$SEQJIT_ISA``), so a capped run never
takes an uncapped run's measurement, nor the reverse. The file is written through a temporary file of
an unpredictable name renamed over it, so a link planted in the cache directory is never written
through. Team of two against one thread is chosen per program as it runs (_native_vm.pyx:
``_hold_team``), so it is not a candidate here.

``SEQJIT_KERNEL_CHOICE=fixed`` skips measuring: packed from 3 rows, as before this module.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

CANDIDATES = ("stored", "packed")
FILE = "kernel_choice.json"
#: the most columns (and rows) a measurement uses, and the most multiply-adds per call (fewer columns
#: for many rows): enough for a steady rate, little enough to stay fast
MEASURE_MAX_N, MEASURE_MAX_M, MEASURE_MAX_MACS = 4096, 256, 1 << 25
#: the fixed choice stays unless the other candidate is at least this much faster (a near tie, as at
#: 1-4 rows where both kernels wait on memory, is not worth a choice that flips between hosts' runs)
MARGIN = 1.05
#: interleaved rounds, and timed calls of each candidate per round (the best is kept)
ROUNDS, CALLS = 2, 3
#: bytes written between timed calls: several times a core's L2, so each call reads its weight from
#: the last-level cache or memory, as in a decode step whose other weights pushed it out of L2
EVICT_BYTES = 16 << 20
#: the largest cache file read (one entry is about 150 bytes; a few hundred shape classes at most)
READ_MAX_BYTES = 1 << 20

_local = threading.local()
_lock = threading.RLock()
_tables: dict = {}  # cache file path -> {class key: entry}, this process's copy


def mode() -> str:
    """``fixed`` or ``measure`` (the default, also when unset or empty), from $SEQJIT_KERNEL_CHOICE."""
    value = os.environ.get("SEQJIT_KERNEL_CHOICE", "").strip().lower() or "measure"
    if value not in ("fixed", "measure"):
        from seqjit.errors import ConfigError

        raise ConfigError(f"SEQJIT_KERNEL_CHOICE must be 'fixed' or 'measure', got {value[:30]!r}")
    return value


def cache_dir() -> Path:
    given = os.environ.get("SEQJIT_CACHE_DIR")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "seqjit"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown"


def _pow2(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def shape_class(m: int, k: int, n: int) -> tuple:
    """(M, K, N) rounded up to powers of two, M at most MEASURE_MAX_M, N at most MEASURE_MAX_N: the
    representative shape measured for every product in the class."""
    return min(_pow2(m), MEASURE_MAX_M), _pow2(k), min(_pow2(n), MEASURE_MAX_N)


def key(cls: tuple, isa_name: str | None = None) -> str:
    """The entry's name in the table: the class, after the ISA variant it was measured with."""
    return "{}/m{}_k{}_n{}".format(isa() if isa_name is None else isa_name, *cls)


def isa() -> str:
    """The instruction-set variant the native linear kernels run now ("avx512", "avx2", "base"),
    or "none" without a native VM."""
    try:
        from . import _native_vm

        return _native_vm.isa()
    except (ImportError, AttributeError):
        return "none"


def fixed_choice(m: int, packed_from: int = 3) -> str:
    """The choice without measuring: stored below ``packed_from`` rows (the linear's 3), packed from there."""
    return "packed" if m >= packed_from else "stored"


def _version() -> str:
    """The seqjit version and the build of the native VM the choices were measured with (its file's
    size and modification time): a rebuilt or reinstalled VM may have other kernels, so it measures
    again, even at the same version (as during development, when the version does not move)."""
    from seqjit import __version__

    try:
        from . import _native_vm

        st = os.stat(_native_vm.__file__)
        return f"{__version__}+vm{st.st_size}.{st.st_mtime_ns}"
    except (ImportError, OSError, AttributeError, TypeError):
        return __version__


def _path() -> Path:
    return cache_dir() / FILE


def _valid(e) -> bool:
    """An entry as :func:`measure` writes it: a candidate chosen, each candidate's finite GFLOP/s."""
    if not isinstance(e, dict) or e.get("choice") not in CANDIDATES or not isinstance(e.get("gflops"), dict):
        return False
    rates = [e["gflops"].get(c) for c in CANDIDATES]
    return all(isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r < float("inf") for r in rates)


def _read_text(path: Path) -> str:
    """The cache file's text, read only from a regular file of at most READ_MAX_BYTES (a FIFO or a
    link to a device at its name is not opened for long: OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > READ_MAX_BYTES:
            raise OSError(f"{path} is not a regular file of at most {READ_MAX_BYTES} bytes")
        raw = os.read(fd, READ_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > READ_MAX_BYTES:
        raise OSError(f"{path} grew past {READ_MAX_BYTES} bytes")
    return raw.decode("utf-8")


def _read(path: Path) -> dict:
    """The file's valid choices when it is for this version and CPU, else {} (also when unreadable,
    not a regular file, or not JSON); a malformed entry is dropped (measured again when needed)."""
    try:
        data = json.loads(_read_text(path))
        if data.get("version") != _version() or data.get("cpu") != cpu_model():
            return {}
        return {k: e for k, e in data["choices"].items() if isinstance(k, str) and _valid(e)}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return {}


def _write(path: Path, table: dict) -> None:
    """Atomically: a temporary file of an unpredictable name beside it (``tempfile.mkstemp``: created
    exclusively, links not followed) renamed over it, so a link planted at a temporary name or at the
    file's own is never written through; a cache that cannot be written is only not kept."""
    data = {"version": _version(), "cpu": cpu_model(), "choices": table}
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{FILE}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _table() -> tuple:
    path = _path()
    if path not in _tables:
        _tables[path] = _read(path)
    return path, _tables[path]


def forget() -> None:
    """Drop this process's copy of the cache (the next choice reads the file again)."""
    with _lock:
        _tables.clear()


def entry(m: int, k: int, n: int) -> dict:
    """The measured entry of (M, K, N)'s class: {"choice", "gflops": {candidate: GFLOP/s}, "shape"},
    measured now if the cache has none ("choice": the linear's, with its fixed choice as the default)."""
    cls = shape_class(m, k, n)
    with _lock:
        path, table = _table()
        found = table.get(key(cls))
        if found is None:
            found = table[key(cls)] = measure(cls)
            _write(path, table)
        return found


def choose(m: int, k: int, n: int, packed_from: int = 3) -> str:
    """"stored" or "packed" for a native product of M rows, K inputs and N outputs. ``packed_from``:
    the caller's fixed threshold, kept in fixed mode and unless the other kernel is MARGIN faster."""
    forced = getattr(_local, "forced", None)
    if forced is not None:
        return forced
    if mode() == "fixed":
        return fixed_choice(m, packed_from)
    return _decide(entry(m, k, n)["gflops"], m, packed_from)


def _decide(gflops: dict, m: int, packed_from: int = 3) -> str:
    """The fixed choice for ``m`` rows unless the other candidate's GFLOP/s is MARGIN higher."""
    default = fixed_choice(m, packed_from)
    other = "stored" if default == "packed" else "packed"
    return other if gflops[other] >= MARGIN * gflops[default] else default


def _program(x: np.ndarray, w: np.ndarray, layout: str):
    """A one-op native program computing x @ w.T with the weight read as ``layout``, bound to ``x``;
    (program, executor), or None when the product has no native form here. Lowered without a
    Python run (nothing passes through Plan.run)."""
    from seqjit.graph import Executor, GraphBuilder

    _local.forced = layout
    try:
        g = GraphBuilder("kernel_choice")
        g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", w)), name="y")
        ex = Executor(g.build(), passes=(), replay="native")
        feeds = {"x": x}
        native = ex.plan_for(feeds).native_replay(feeds)
        if native is None:
            return None
        native.bind(feeds)
    finally:
        _local.forced = None
    return native.program, ex


def measure(cls: tuple) -> dict:
    """Time every candidate on the class's representative shape (random data, calling thread)."""
    m, k, n = cls
    n = max(256, min(n, MEASURE_MAX_MACS // (m * k))) // 32 * 32 if m * k * n > MEASURE_MAX_MACS else max(32, n)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    progs = {c: _program(x, w, c) for c in CANDIDATES}
    if None in progs.values():  # no native replay (a Python-only build): nothing to choose between
        return {"choice": fixed_choice(m), "gflops": dict.fromkeys(CANDIDATES, 0.0), "shape": [m, k, n]}
    best = dict.fromkeys(CANDIDATES, float("inf"))
    evict = np.zeros(EVICT_BYTES // 4, np.float32)
    for _ in range(ROUNDS):  # interleaved: both see the same neighbours on the host
        for c, (prog, _ex) in progs.items():
            for _ in range(CALLS):
                evict += 1.0  # the weight leaves the caches, as a decode step's other weights push it out
                t0 = time.perf_counter()
                prog.run(1)
                best[c] = min(best[c], time.perf_counter() - t0)
    flop = 2.0 * m * k * n
    gflops = {c: flop / t / 1e9 for c, t in best.items()}
    return {"choice": _decide(gflops, m), "gflops": gflops, "shape": [m, k, n]}


#: the shape classes ``seqjit inspect --kernels`` shows: Marian's decode-step products
#: (attention, FFN in and out, output projection) at 1 to 256 rows
SHOWN = [(m, k, n) for k, n in ((512, 512), (512, 2048), (2048, 512), (512, 58101)) for m in (1, 2, 4, 16, 64, 256)]


def report_lines(shapes=None) -> list:
    """The instruction set each native kernel family runs, then one line per shape class of ``shapes``
    (default SHOWN): the candidates' GFLOP/s (measured now if not cached) and the choice."""
    shapes = SHOWN if shapes is None else shapes
    from seqjit.kernels import _isa

    families = " ".join(f"{f}={v}" for f, v in _isa.by_family().items())
    lines = [f"kernel choice ({mode()}; cache {_path()}; CPU {cpu_model()}; ISA {isa()})",
             f"instruction sets (SEQJIT_ISA={_isa.requested() or 'unset'}): native_vm={isa()} {families}",
             f"{'M':>4} {'K':>5} {'N':>5} | " + " ".join(f"{c:>8}" for c in CANDIDATES) + " GFLOP/s | choice"]
    for m, k, n in shapes:
        m_c, k_c, n_c = shape_class(m, k, n)
        if mode() == "fixed":
            lines.append(f"{m_c:4} {k_c:5} {n_c:5} | " + " ".join(f"{'-':>8}" for _ in CANDIDATES)
                         + f"         | {fixed_choice(m)} (fixed)")
            continue
        e = entry(m, k, n)
        lines.append(f"{m_c:4} {k_c:5} {n_c:5} | " + " ".join(f"{e['gflops'][c]:8.1f}" for c in CANDIDATES)
                     + f"         | {e['choice']}")
    return lines
