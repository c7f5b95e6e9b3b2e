"""The team of two (kernels/_runtime/native_team.h): a decode at 2 threads splits its products over
the calling thread and one worker, and gives bit-for-bit the single-thread results; concurrent
callers, where only one can hold the team, too. (A program's first run at 2 threads goes alone, its
second with the team: each test makes at least two.)"""
import threading

import pytest

import seqjit
from seqjit.graph import _native_vm
from seqjit.kernels._threads import thread_cap


@pytest.fixture(scope="module")
def tiny(make_tiny_marian, tmp_path_factory):
    path = tmp_path_factory.mktemp("team")
    # d_model 128: the decode step's products reach the team's size (16K multiply-adds)
    make_tiny_marian(seed=11, d_model=128, encoder_ffn_dim=256, decoder_ffn_dim=256).save_pretrained(path)
    model = seqjit.from_hf(path)
    model.set_replay("native")
    return model


def test_two_threads_give_the_single_thread_logits_bit_for_bit(tiny, team_logits):
    team_logits(tiny)


def test_greedy_at_two_threads_equals_one_thread(tiny, with_threads, marian_sources):
    srcs = marian_sources(6, seed=1) * 2  # each source twice: its plan's second run takes the team
    opts = dict(max_length=12, return_scores=True)
    one = with_threads(1, lambda: [tiny.generate([s], **opts)[0] for s in srcs])
    before = _native_vm.team_counts()[0]
    two = with_threads(2, lambda: [tiny.generate([s], **opts)[0] for s in srcs])
    assert _native_vm.team_counts()[0] > before
    assert [r.ids for r in two] == [r.ids for r in one]
    assert [r.scores for r in two] == [r.scores for r in one]


def test_concurrent_callers_share_one_team_and_get_serial_results(tiny, with_threads, marian_sources):
    """Only one caller can hold the team; the others run their products alone. Results equal
    the serial ones whoever held it."""
    srcs = marian_sources(16, seed=2)
    want = with_threads(1, lambda: [tiny.generate([s], max_length=10)[0].ids for s in srcs])
    got = [None] * len(srcs)
    errors = []

    def work(k):
        try:
            for i in range(k, len(srcs), 4):
                got[i] = tiny.generate([srcs[i]], max_length=10)[0].ids
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def run_all():
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    with_threads(2, run_all)
    assert not errors
    assert got == want


def test_a_thread_capped_to_one_does_not_take_the_team(tiny, with_threads, marian_sources):
    srcs = marian_sources(2, seed=3)

    def capped():
        with thread_cap(1):
            before = _native_vm.team_counts()[0]
            tiny.generate(srcs, max_length=8)
            return _native_vm.team_counts()[0] - before

    assert with_threads(2, capped) == 0


def test_a_forced_team_mode_runs_with_or_without_the_team_and_gives_the_same_logits(tiny, with_threads, marian_sources):
    """``Program.run(nthreads, team_mode)`` (benchmarks/decoding/step_breakdown.py): 1 splits the
    products over the team, 0 runs them alone; both give the single-thread logits bit for bit."""
    import numpy as np

    srcs = marian_sources(4, seed=5)
    n = min(map(len, srcs))
    src = np.array([s[-n:] for s in srcs])  # one length (the end token kept last)

    def logits(mode):
        state = tiny.start(src, max_length=8)
        feeds = tiny.step_feeds(state, np.full(src.shape[0], tiny.decoder_start_id, np.int64))
        native = tiny.step_plan(state, "decoder_step", feeds).native_replay(feeds)
        native.bind(feeds)
        before = _native_vm.team_counts()[0]
        native.program.run(1 if mode is None else 2, -1 if mode is None else mode)
        return native.output("logits").copy(), _native_vm.team_counts()[0] - before

    _native_vm.team_forgive()
    want, _ = with_threads(1, lambda: logits(None))
    team, team_items = with_threads(2, lambda: logits(1))  # first: left to itself, a first run goes alone
    _native_vm.team_forgive()
    alone, alone_items = with_threads(2, lambda: logits(0))  # second: left to itself, it takes the team
    assert alone_items == 0 and team_items > 0
    np.testing.assert_array_equal(alone, want)
    np.testing.assert_array_equal(team, want)


def test_a_program_of_only_large_products_takes_the_team_at_two_threads(with_threads):
    """A product of PARALLEL_MACS multiply-adds or more is planned for the run's threads (OpenMP);
    at exactly 2 threads the team runs it (half the OpenMP time on a 2-core VM), so a program of
    only such products (a one-op program, a 64-row decode step) holds the team too, and
    gives the single-thread result bit for bit; at 3 threads it keeps OpenMP."""
    import numpy as np

    from seqjit.graph import Executor, GraphBuilder
    from seqjit.graph.native_ops import PARALLEL_MACS

    m, k, n = 40, 256, 2048  # 20.9M multiply-adds, a partial last row block, 64 panels
    assert m * k * n >= PARALLEL_MACS
    rng = np.random.default_rng(3)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    g = GraphBuilder("wide")
    g.output(g.op("linear", g.input("x", dtype="float"), g.constant("w", w)), name="y")
    ex = Executor(g.build(), passes=(), replay="native")
    native = ex.plan_for({"x": x}).native_replay({"x": x})
    native.bind({"x": x})
    prog = native.program
    assert prog.team_nodes == 0 and prog.wide_team_nodes == 1

    def run(nthreads, mode):
        before = _native_vm.team_counts()[0]
        prog.run(nthreads, mode)
        return native.output("y").copy(), _native_vm.team_counts()[0] - before

    _native_vm.team_forgive()
    want, _ = with_threads(1, lambda: run(1, -1))
    team, team_items = with_threads(2, lambda: run(2, 1))
    _native_vm.team_forgive()
    wide, wide_items = with_threads(3, lambda: run(3, 1))  # 3 threads: no team, even when asked
    assert team_items == 1 and wide_items == 0
    np.testing.assert_array_equal(team, want)
    np.testing.assert_array_equal(wide, want)
    np.testing.assert_allclose(want, x @ w.T, rtol=1e-4, atol=1e-3)  # against NumPy, not itself


def test_beam_search_at_two_threads_splits_its_sources_and_equals_one_thread(tiny, with_threads, marian_sources):
    """The native beam loop gives each step's per-source work (log-softmax, top-2K, advance) to the
    team in two halves of the sources when the run holds it; every hypothesis and score equals the
    single-thread search's (the Python reference's equality is tests/decoding/test_native_beam.py)."""
    srcs = marian_sources(7, seed=4)  # an odd batch: halves of 4 and 3 sources, ended at different steps
    opts = dict(max_length=12, beam_size=4, num_hypotheses=2, return_scores=True, max_batch_size=7)
    one = with_threads(1, lambda: tiny.generate(srcs, **opts))
    _native_vm.team_forgive()
    before = _native_vm.team_counts()[0]
    two = with_threads(2, lambda: [tiny.generate(srcs, **opts) for _ in range(3)])  # the first goes alone
    assert _native_vm.team_counts()[0] > before
    for got in two:
        assert [r.ids for r in got] == [r.ids for r in one]
        assert [r.scores for r in got] == [r.scores for r in one]


def test_beam_at_two_threads_equals_one_thread(tiny, with_threads, marian_sources):
    """Beam search holding the team splits each step's per-source work and its state reorder into
    two halves of the sources (graph/_native_beam.pxi), each half its own scratch: the results are
    the single-thread ones (which test_native_beam.py checks against the Python loop)."""
    srcs = marian_sources(7, seed=4)
    opts = dict(max_length=14, beam_size=4, num_hypotheses=2, length_penalty=0.7, return_scores=True)
    one = with_threads(1, lambda: tiny.generate(srcs, **opts))
    before = _native_vm.team_counts()[0]
    two = with_threads(2, lambda: [tiny.generate(srcs, **opts) for _ in range(2)])  # the second takes the team
    assert _native_vm.team_counts()[0] > before
    for got in two:
        assert [r.ids for r in got] == [r.ids for r in one]
        assert [r.scores for r in got] == [r.scores for r in one]
