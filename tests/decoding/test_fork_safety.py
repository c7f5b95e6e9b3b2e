"""Decoding in a child process after the parent decoded (issue 25, item 1): a forked child (plain
``os.fork``, a ``multiprocessing`` fork pool) must not wait on the parent's thread pool, whose
threads do not exist there, and a spawned child decodes like the parent; after batches of 1, 16 and
64 rows at 1 and 2 threads. Every wait has a deadline, so a hang fails the test instead of the suite."""
import multiprocessing
import os
import pickle
import signal
import sys
import time

import numpy as np
import pytest

import seqjit

sys.path.insert(0, os.path.dirname(__file__))
import fork_worker  # noqa: E402  (a spawned child imports it by name)

TIMEOUT = 30.0  # seconds; a decode here takes well under one
MAX_LENGTH = 12
ROWS = [1, 16, 64]
THREADS = [1, 2]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


@pytest.fixture(scope="module")
def specs(make_tiny_marian, tmp_path_factory):
    """Model specs for :mod:`fork_worker`: a G2P Transformer and a tiny Marian (whose products at 2
    threads go to the native team of two)."""
    path = tmp_path_factory.mktemp("marian")
    make_tiny_marian(seed=5).save_pretrained(path)
    return {"g2p": ("g2p", "transformer"), "marian": ("hf", str(path))}


def _sources(spec, rows):
    model = fork_worker.load(spec)
    low, high = (1, 94) if spec[0] == "hf" else (3, model.source_vocab_size)
    rng = np.random.default_rng(rows)
    return [rng.integers(low, high, int(k)).tolist() for k in rng.integers(2, 12, rows)]


@pytest.fixture
def parent_decoded():
    """``parent_decoded(spec, rows, threads)`` -> (sources, ids): the parent decodes a batch first
    (starting its pools and teams), then restores its thread setting."""
    before = seqjit.get_num_threads()

    def run(spec, rows, threads):
        sources = _sources(spec, rows)
        return sources, fork_worker.decode(spec, sources, threads, MAX_LENGTH)
    yield run
    seqjit.set_num_threads(before)


def _in_forked_child(fn, out_path):
    """``fn()`` run in a child made by ``os.fork``; its result, or a test failure when the child
    raises, dies or runs past the deadline (it is then killed)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            signal.alarm(int(TIMEOUT) + 10)
            result = ("ok", fn())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            result = ("error", repr(exc))
        try:
            with open(out_path, "wb") as f:
                pickle.dump(result, f)
        finally:
            os._exit(0)
    deadline = time.monotonic() + TIMEOUT
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child did not finish within {TIMEOUT:.0f} s (hung)")
        time.sleep(0.01)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the forked child died: status {status}"
    with open(out_path, "rb") as f:
        kind, value = pickle.load(f)
    assert kind == "ok", f"the forked child raised {value}"
    return value


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("arch", ["g2p", "marian"])
def test_os_fork_child_decodes_like_parent(specs, parent_decoded, tmp_path, arch, rows, threads):
    spec = specs[arch]
    sources, expected = parent_decoded(spec, rows, threads)
    got = _in_forked_child(lambda: fork_worker.decode(spec, sources, threads, MAX_LENGTH), tmp_path / "out")
    assert got == expected


def _pool_results(ctx, spec, jobs):
    """``fork_worker.decode(spec, *job)`` for every job on a pool of two ``ctx`` workers, each
    waited for at most the deadline (the pool is terminated either way)."""
    pool = ctx.Pool(2)
    try:
        pending = [pool.apply_async(fork_worker.decode, (spec, *job)) for job in jobs]
        deadline = time.monotonic() + TIMEOUT
        try:
            return [p.get(timeout=max(0.1, deadline - time.monotonic())) for p in pending]
        except multiprocessing.TimeoutError:
            pytest.fail(f"a {ctx.get_start_method()} pool worker did not finish within {TIMEOUT:.0f} s (hung)")
    finally:
        pool.terminate()
        pool.join()


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("arch", ["g2p", "marian"])
def test_fork_pool_decodes_like_parent(specs, parent_decoded, arch, threads):
    spec = specs[arch]
    cases = [parent_decoded(spec, rows, threads) for rows in ROWS]  # the parent's pools now started
    got = _pool_results(multiprocessing.get_context("fork"), spec,
                        [(sources, threads, MAX_LENGTH) for sources, _ in cases] * 2)
    assert got == [ids for _, ids in cases] * 2


@pytest.mark.parametrize("arch", ["g2p", "marian"])
def test_spawn_pool_decodes_like_parent(specs, parent_decoded, arch):
    spec = specs[arch]
    cases = [(threads, *parent_decoded(spec, rows, threads)) for rows in ROWS for threads in THREADS]
    got = _pool_results(multiprocessing.get_context("spawn"), spec,
                        [(sources, threads, MAX_LENGTH) for threads, sources, _ in cases])
    assert got == [ids for _, _, ids in cases]


def test_forked_child_takes_the_native_team_while_the_parent_was_decoding(specs, tmp_path):
    """A fork while another thread is inside a native run: the child must not inherit that run's
    count (kernels/_runtime/native_team.h lends the team of two only to a lone run), or its products
    never go to the team again. Each child tries ten times: a program whose runs have been faster
    alone still tries the team every 8th run, and a busy machine may make the team back off once;
    with the inherited count no try succeeds."""
    import threading

    from seqjit.decoding.api import pad_sources
    from seqjit.graph import _native_vm

    model = fork_worker.load(specs["marian"])
    ids, lens = pad_sources(_sources(specs["marian"], 3), model.pad_id)
    tgt = np.array([[model.decoder_start_id, 5, 9, 13, 2]] * 3, np.int64)
    before = seqjit.get_num_threads()
    seqjit.set_num_threads(2)
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            model.logits_stepwise(ids, tgt, lens)

    def child_uses_the_team():
        for _ in range(10):
            _native_vm.team_forgive()
            start = _native_vm.team_counts()[0]
            model.logits_stepwise(ids, tgt, lens)
            if _native_vm.team_counts()[0] > start:
                return True
        return False

    thread = threading.Thread(target=busy, daemon=True)
    try:
        model.logits_stepwise(ids, tgt, lens)
        _native_vm.team_forgive()
        start = _native_vm.team_counts()[0]
        model.logits_stepwise(ids, tgt, lens)
        if _native_vm.team_counts()[0] == start:
            pytest.skip("the team of two takes no product of this model here")
        thread.start()
        for trial in range(12):
            time.sleep(0.002 * (trial % 5))
            assert _in_forked_child(child_uses_the_team, tmp_path / f"team{trial}"), f"child {trial} never took the team"
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(TIMEOUT)
        seqjit.set_num_threads(before)
