"""One loaded model called from many threads gives exactly the serial results (issue 12, item 1):
every architecture; greedy, beam, seeded sampling, streaming and batched calls; and a thread
changing ``set_num_threads`` meanwhile."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import seqjit

THREADS = 8
CALLS = 48

CASES = {
    "greedy": dict(max_length=12),
    "greedy-scores": dict(max_length=10, min_length=3, return_scores=True),
    "beam": dict(max_length=9, beam_size=3, num_hypotheses=2, return_scores=True),
    "sampling": dict(max_length=10, sampling_topk=5, sampling_temperature=0.8, seed=1234),
    "attention": dict(max_length=8, return_attention=True),
}


@pytest.fixture(scope="module")
def shared_models(make_tiny_marian, tmp_path_factory):
    from seqjit.g2p import G2P

    path = tmp_path_factory.mktemp("marian")
    make_tiny_marian(seed=5).save_pretrained(path)
    rng = np.random.default_rng(3)
    models = {"marian": (seqjit.from_hf(path), [list(rng.integers(1, 94, n)) + [0] for n in range(1, 14)])}
    for name in ("gru", "attention", "transformer"):
        m = G2P(name).model
        models[f"g2p-{name}"] = (m, [list(rng.integers(3, m.source_vocab_size, n)) for n in range(1, 14)])
    return models


def _key(results):
    out = []
    for r in results:
        out.append((r.ids, None if r.scores is None else np.round(r.scores, 4).tolist(),
                    None if r.attention is None else [np.round(a, 5).tolist() for a in r.attention]))
    return out


def _call(model, sources, opts, k):
    """Call k: one source alone, or a batch of several (so batch sizes differ between threads)."""
    if k % 3 == 0:
        batch = [sources[(k + j) % len(sources)] for j in range(4)]
        return _key(model.generate(batch, **opts))
    return _key(model.generate([sources[k % len(sources)]], **opts))


ARCHS = ["marian", "g2p-gru", "g2p-attention", "g2p-transformer"]
#: the vanilla seq2seq has no attention to return
PAIRS = [(a, c) for a in ARCHS for c in CASES if not (a == "g2p-gru" and c == "attention")]


@pytest.mark.parametrize("arch,case", PAIRS)
def test_shared_model_many_threads_equals_serial(shared_models, arch, case):
    model, sources = shared_models[arch]
    opts = CASES[case]
    serial = [_call(model, sources, opts, k) for k in range(CALLS)]
    with ThreadPoolExecutor(THREADS) as pool:
        parallel = list(pool.map(lambda k: _call(model, sources, opts, k), range(CALLS)))
    mismatched = [k for k in range(CALLS) if parallel[k] != serial[k]]
    assert not mismatched, f"{len(mismatched)} of {CALLS} calls differ from serial: {mismatched[:8]}"


def test_streaming_and_thread_count_changes_during_decoding(shared_models):
    model, sources = shared_models["marian"]
    serial = [[t.token for t in model.generate_stream(s, max_length=12)] for s in sources]
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            for n in (1, 2):
                seqjit.set_num_threads(n)
    before = seqjit.get_num_threads()
    churner = threading.Thread(target=churn)
    churner.start()
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            parallel = list(pool.map(lambda k: [t.token for t in model.generate_stream(sources[k % len(sources)],
                                                                                      max_length=12)],
                                     range(CALLS)))
    finally:
        stop.set()
        churner.join()
        seqjit.set_num_threads(before)
    assert parallel == [serial[k % len(sources)] for k in range(CALLS)]


def test_g2p_predictor_shared_between_threads():
    from seqjit.g2p import G2P

    g2p = G2P("attention")
    words = ["hello", "world", "transliteration", "cat", "seqjit", "banana", "zebra", "queue"] * 4
    serial = [g2p.predict([w])[0].phonemes for w in words]
    with ThreadPoolExecutor(THREADS) as pool:
        parallel = list(pool.map(lambda w: g2p.predict([w])[0].phonemes, words))
    assert parallel == serial


@pytest.mark.parametrize("name", ["gru", "attention", "transformer"])
def test_fresh_model_first_used_by_many_threads(name):
    """Plans lowered at the same time in several threads (transposed weights shared through the
    graph) give the results of a model used serially."""
    from seqjit.g2p import G2P

    rng = np.random.default_rng(11)
    serial_model, fresh = G2P(name).model, G2P(name).model
    batches = [[list(rng.integers(3, fresh.source_vocab_size, int(n))) for n in rng.integers(1, 12, 9)]
               for _ in range(THREADS)]
    serial = [_key(serial_model.generate(b, max_length=16)) for b in batches]
    with ThreadPoolExecutor(THREADS) as pool:
        parallel = list(pool.map(lambda b: _key(fresh.generate(b, max_length=16)), batches))
    assert parallel == serial
