"""The per-host kernel choice (seqjit.graph.kernel_choice): measured once per shape class, cached in
the user cache directory (here a temporary one), invalidated by version and CPU, never broken by a bad
file; the fixed mode; and that the lowering follows the choice with outputs equal to NumPy's."""
import json

import numpy as np
import pytest

from seqjit.graph import Executor, GraphBuilder
from seqjit.graph import kernel_choice as kc

SHAPE = (16, 64, 96)  # a small class: measured in a few ms


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory, measure mode, and a count of the measurements made."""
    monkeypatch.setenv("SEQJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SEQJIT_KERNEL_CHOICE", raising=False)
    monkeypatch.setattr(kc, "EVICT_BYTES", 1 << 20)  # the choice is not under test here, its bookkeeping is
    calls = []
    real = kc.measure
    monkeypatch.setattr(kc, "measure", lambda cls: calls.append(cls) or real(cls))
    kc.forget()
    yield tmp_path / kc.FILE, calls
    kc.forget()


def test_round_trip(cache):
    path, calls = cache
    first = kc.entry(*SHAPE)
    assert calls == [kc.shape_class(*SHAPE)] and first["choice"] in kc.CANDIDATES
    assert set(first["gflops"]) == set(kc.CANDIDATES) and all(v > 0 for v in first["gflops"].values())
    data = json.loads(path.read_text())
    assert data["cpu"] == kc.cpu_model() and data["version"] == kc._version()
    kc.forget()  # a new process: reads the file, measures nothing
    assert kc.entry(*SHAPE) == first and kc.choose(*SHAPE) == first["choice"]
    assert kc.entry(9, 60, 70) == first  # the same class
    assert len(calls) == 1


@pytest.mark.parametrize("field", ["version", "cpu"])
def test_other_version_or_cpu_measures_again(cache, field):
    path, calls = cache
    kc.entry(*SHAPE)
    data = json.loads(path.read_text())
    data[field] = "something else"
    path.write_text(json.dumps(data))
    kc.forget()
    kc.entry(*SHAPE)
    assert len(calls) == 2
    assert json.loads(path.read_text())[field] == (kc._version() if field == "version" else kc.cpu_model())


def test_rebuilt_native_vm_measures_again(cache, monkeypatch, tmp_path):
    """Same seqjit version, another build of the native VM (its file's size and time): measured again."""
    from seqjit.graph import _native_vm

    path, calls = cache
    kc.entry(*SHAPE)
    other = tmp_path / "vm.so"
    other.write_bytes(b"another build")
    monkeypatch.setattr(_native_vm, "__file__", str(other))
    kc.forget()
    kc.entry(*SHAPE)
    assert len(calls) == 2
    assert json.loads(path.read_text())["version"].endswith(f"+vm{other.stat().st_size}.{other.stat().st_mtime_ns}")


@pytest.mark.parametrize("text", ["{not json", "[]", '{"version": 1}', "null",
                                  '{"choices": {"m16_k64_n128": {"choice": "blas"}}}'])
def test_corrupted_file_measures_again(cache, text):
    path, calls = cache
    kc.entry(*SHAPE)
    data = json.loads(path.read_text())
    if "blas" in text:  # right version and CPU, an unknown candidate
        data["choices"][kc.key(kc.shape_class(*SHAPE))]["choice"] = "blas"
        text = json.dumps(data)
    path.write_text(text)
    kc.forget()
    assert kc.choose(*SHAPE) in kc.CANDIDATES
    assert len(calls) == 2
    assert json.loads(path.read_text())["choices"]  # rewritten whole


def test_fixed_mode_measures_nothing(cache, monkeypatch):
    path, calls = cache
    monkeypatch.setenv("SEQJIT_KERNEL_CHOICE", "fixed")
    assert [kc.choose(m, 512, 2048) for m in (1, 2, 3, 16)] == ["stored", "stored", "packed", "packed"]
    assert calls == [] and not path.exists()
    assert "(fixed)" in kc.report_lines([(16, 512, 2048)])[-1]


def _linear(x, w):
    g = GraphBuilder("linear")
    g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", w)), name="y")
    ex = Executor(g.build(), passes=(), replay="native")
    y = ex.run({"x": x})["y"]
    assert ex.plan_for({"x": x}).native is not None, "the product must run natively"
    return y, ex


@pytest.mark.parametrize("choice", kc.CANDIDATES)
@pytest.mark.parametrize("m", [1, 3, 16])
def test_lowering_follows_the_choice_and_matches_numpy(cache, choice, m, tol):
    """A cached measurement decides the weight layout of the plan (packed: the graph gets a packed
    copy), and the product equals NumPy's either way."""
    path, calls = cache
    rng = np.random.default_rng(m)
    k, n = 64, 96
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    gflops = {c: 2.0 if c == choice else 1.0 for c in kc.CANDIDATES}  # the choice twice as fast as the other
    entry = {"choice": choice, "gflops": gflops, "shape": list(kc.shape_class(m, k, n))}
    path.write_text(json.dumps({"version": kc._version(), "cpu": kc.cpu_model(),
                                "choices": {kc.key(kc.shape_class(m, k, n)): entry}}))
    y, ex = _linear(x, w)
    assert calls == []
    assert bool(ex.graph.__dict__.get("_native_packed")) == (choice == "packed")
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64), **tol(np.float32))


def test_measured_choice_matches_numpy(cache, tol):
    """Measuring inside a lowering (nested one-op programs) works, and the chosen kernel is right."""
    path, calls = cache
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 64), dtype=np.float32)
    w = rng.standard_normal((200, 64), dtype=np.float32)
    y, _ = _linear(x, w)
    assert calls == [kc.shape_class(5, 64, 200)] and path.exists()
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64), **tol(np.float32))


def test_inspect_kernels_prints_the_measured_choice(cache, monkeypatch, capsys):
    from seqjit.cli import main

    path, calls = cache
    monkeypatch.setattr(kc, "SHOWN", [SHAPE])
    assert main(["inspect", "--kernels"]) == 0
    out = capsys.readouterr().out.splitlines()
    entry = json.loads(path.read_text())["choices"][kc.key(kc.shape_class(*SHAPE))]
    m, k, n = kc.shape_class(*SHAPE)
    assert out[-1].split() == [str(m), str(k), str(n), "|", *(f"{entry['gflops'][c]:.1f}" for c in kc.CANDIDATES),
                               "|", entry["choice"]]
    assert str(path) in out[0] and len(calls) == 1


def test_bad_mode_is_a_config_error(cache, monkeypatch):
    from seqjit.errors import ConfigError

    monkeypatch.setenv("SEQJIT_KERNEL_CHOICE", "fxed")
    with pytest.raises(ConfigError, match="SEQJIT_KERNEL_CHOICE"):
        kc.choose(*SHAPE)


@pytest.mark.parametrize("forced", kc.CANDIDATES)
@pytest.mark.parametrize("mode,b", [("gru", 1), ("gru", 3), ("lstm", 2), ("lstm", 6)])
def test_rnn_sequence_either_layout_matches_the_reference(forced, mode, b, monkeypatch, tol):
    """The native GRU/LSTM sequence at any row count with its weights packed or as stored (whatever
    a host's measurement picks) equals the NumPy reference."""
    from seqjit import kernels

    rng = np.random.default_rng(b)
    t, i, h, g = 5, 6, 8, 3 if mode == "gru" else 4
    params = {"weight_ih_l0": rng.standard_normal((g * h, i), dtype=np.float32) * 0.4,
              "weight_hh_l0": rng.standard_normal((g * h, h), dtype=np.float32) * 0.4,
              "bias_ih_l0": rng.standard_normal(g * h, dtype=np.float32), "bias_hh_l0": rng.standard_normal(g * h, dtype=np.float32)}
    x, lengths = rng.standard_normal((b, t, i), dtype=np.float32), np.array([5, 2, 4, 1, 5, 3][:b], np.int64)
    keys = tuple(params)
    gb = GraphBuilder("rnn")
    ws = [gb.constant(k, params[k]) for k in keys]
    states = (None,) if mode == "gru" else (None, None)
    outs = gb.op(mode, gb.input("x", dtype="float"), *states, gb.input("lengths", dtype="int"), *ws, keys=keys,
                 batch_first=True, outputs=2 if mode == "gru" else 3)
    gb.output(outs[0], name="out")
    ex = Executor(gb.build(), passes=(), replay="native")
    monkeypatch.setattr(kc._local, "forced", forced, raising=False)
    got = ex.run({"x": x, "lengths": lengths})["out"]
    assert ex.plan_for({"x": x, "lengths": lengths}).native is not None
    assert bool(ex.graph.__dict__.get("_native_packed")) == (forced == "packed")
    want = kernels.get(mode, "reference")(x, params, lengths=lengths, batch_first=True)[0]
    np.testing.assert_allclose(got, want, **tol(np.float32))


def test_a_near_tie_keeps_the_callers_fixed_choice(cache):
    path, calls = cache

    def cached(m, stored, packed):
        e = {"choice": "stored", "gflops": {"stored": stored, "packed": packed}, "shape": list(kc.shape_class(m, 64, 96))}
        path.write_text(json.dumps({"version": kc._version(), "cpu": kc.cpu_model(),
                                    "choices": {kc.key(kc.shape_class(m, 64, 96)): e}}))
        kc.forget()

    cached(16, stored=1.03, packed=1.0)
    assert kc.choose(16, 64, 96) == "packed"               # fixed: packed from 3 rows; 3% is a tie
    cached(16, stored=1.1, packed=1.0)
    assert kc.choose(16, 64, 96) == "stored"
    cached(3, stored=1.0, packed=1.03)
    assert kc.choose(3, 64, 96) == "packed" and kc.choose(3, 64, 96, packed_from=5) == "stored"
    cached(3, stored=1.0, packed=1.2)
    assert kc.choose(3, 64, 96, packed_from=5) == "packed"
    assert calls == []


def test_planted_temporary_name_is_not_written_through(cache, tmp_path):
    """The temporary file the cache is written through has a name no one can plant a link at: the
    names the old scheme used (pid, thread) are links to a victim, which stays as it was."""
    import os
    import threading

    path, calls = cache
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for name in (f".{kc.FILE}.{os.getpid()}.{threading.get_ident()}", f".{kc.FILE}.tmp"):
        os.symlink(victim, tmp_path / name)
    kc.entry(*SHAPE)
    assert victim.read_text() == "precious"
    assert json.loads(path.read_text())["choices"]  # the cache was written, beside the links
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


def test_fifo_at_the_cache_path_does_not_block(cache):
    import os

    from ..hostile_paths import deadline

    path, calls = cache
    os.mkfifo(path)
    with deadline(30):
        assert kc.entry(*SHAPE)["choice"] in kc.CANDIDATES
    assert len(calls) == 1 and path.is_file()  # measured, and the FIFO replaced by the cache file


def test_link_to_dev_zero_at_the_cache_path_is_not_read_forever(tmp_path):
    import os

    from ..hostile_paths import run_bounded

    os.symlink("/dev/zero", tmp_path / kc.FILE)
    code = ("from pathlib import Path; from seqjit.graph import kernel_choice as kc; "
            f"print(kc._read(Path({str(tmp_path / kc.FILE)!r})))")
    done = run_bounded(code, seconds=60, memory=1 << 30)
    assert done.returncode == 0 and done.stdout.strip() == "{}", done.stderr[-2000:]


@pytest.mark.parametrize("entry", [{"choice": "packed"}, {"choice": "packed", "gflops": {"stored": 1.0}},
                                   {"choice": "packed", "gflops": {"stored": "1", "packed": 2.0}},
                                   {"choice": "stored", "gflops": {"stored": float("nan"), "packed": 1.0}},
                                   {"choice": "stored", "gflops": []}])
def test_bad_entry_is_measured_again(cache, entry):
    """A cached entry without a candidate's rate (or with one that is not a number) is dropped and
    measured again, not a KeyError in choose()."""
    path, calls = cache
    data = {"version": kc._version(), "cpu": kc.cpu_model(), "choices": {kc.key(kc.shape_class(*SHAPE)): entry}}
    path.write_text(json.dumps(data))
    assert kc.choose(*SHAPE) in kc.CANDIDATES
    assert len(calls) == 1
