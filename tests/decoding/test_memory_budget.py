"""One memory budget per decoding call (issue 25, item 4): everything a mode allocates (decoder and
encoder state, token, beam and n-best buffers, attention buffers, logits) is counted before anything
is allocated, against the memory available now and a user-set cap; a request past it raises
MemoryBudgetExceeded naming the options to lower."""
import subprocess
import sys
import time

import pytest

from seqjit.decoding import limits
from seqjit.errors import MemoryBudgetExceeded
from seqjit.g2p import G2P

CHILD = """import sys, time
from seqjit.decoding import limits
limits.available_memory = lambda: 4 << 30  # as on a machine with 4 GiB free
from seqjit.g2p import G2P
model = G2P("gru").model
start = time.monotonic()
try:
    model.generate([[5, 6, 7]], beam_size=20000, max_length=65536)
except Exception as exc:
    print(type(exc).__name__, round(time.monotonic() - start, 3), exc)
else:
    print("no error")
"""


def test_a_huge_beam_fails_fast_with_a_clear_error():
    """Today's code counts only the decoder state and tries to allocate ~10 GiB of token buffers:
    run in a child with a 6 GiB address-space limit and a deadline, so it cannot take the suite down."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    try:
        out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120,
                             preexec_fn=limit).stdout
    except subprocess.TimeoutExpired:
        pytest.fail("generate(beam_size=20000, max_length=65536) ran for minutes instead of failing fast")
    name, seconds, message = (out.split(" ", 2) + ["", ""])[:3]
    assert name == "MemoryBudgetExceeded", out
    assert float(seconds) < 1.0
    assert "decoding 20000 rows (batch x beam) at max_length 65536" in message and "token buffers" in message
    assert "lower max_length, max_batch_size, beam_size" in message and "memory available now" in message


@pytest.fixture
def cap():
    """``cap(bytes)``: a memory limit for this test only."""
    yield limits.set_memory_limit
    limits.set_memory_limit(None)


def _need(model, **options):
    from seqjit.decoding import DecodingOptions

    opts = DecodingOptions(**options).validate()
    return limits.decode_bytes(model, opts, 4 * opts.beam_size, 3)


def test_attention_buffers_count_and_are_named(cap):
    model = G2P("transformer").model
    sources = [[5, 6, 7]] * 4
    plain = _need(model, beam_size=8, max_length=100)
    attended = _need(model, beam_size=8, max_length=100, return_attention=True)
    assert attended["attention buffers"] > 0 and "attention buffers" not in plain
    cap(sum(plain.values()) + 1)
    model.generate(sources, beam_size=8, max_length=100)  # fits
    with pytest.raises(MemoryBudgetExceeded, match=r"attention buffers .*lower max_length, max_batch_size, "
                                                   r"beam_size, return_attention=False"):
        model.generate(sources, beam_size=8, max_length=100, return_attention=True)


def test_beam_and_n_best_buffers_count(cap):
    model = G2P("gru").model
    greedy, beam = _need(model, max_length=200), _need(model, beam_size=4, num_hypotheses=4, max_length=200)
    assert beam["n-best"] > 0 and beam["token buffers"] > 4 * greedy["token buffers"]
    cap(sum(beam.values()) - 1)
    with pytest.raises(MemoryBudgetExceeded, match="lower max_length, max_batch_size, beam_size, num_hypotheses"):
        model.generate([[5, 6, 7]] * 4, beam_size=4, num_hypotheses=4, max_length=200)


def test_the_budget_is_checked_on_every_call_against_available_memory(monkeypatch, cap):
    model = G2P("gru").model
    model.generate([[5, 6, 7]] * 4, beam_size=2, max_length=150)
    need = sum(_need(model, beam_size=2, max_length=150).values())
    monkeypatch.setattr(limits, "SMALL_REQUEST", 0)
    monkeypatch.setattr(limits, "available_memory", lambda: need - 1)  # memory taken since the last call
    start = time.monotonic()
    with pytest.raises(MemoryBudgetExceeded, match="more than the memory available now"):
        model.generate([[5, 6, 7]] * 4, beam_size=2, max_length=150)
    assert time.monotonic() - start < 1.0
    monkeypatch.setattr(limits, "available_memory", lambda: need)
    cap(need - 1)  # a cap below what is available wins
    with pytest.raises(MemoryBudgetExceeded, match=r"more than the memory limit set"):
        model.generate([[5, 6, 7]] * 4, beam_size=2, max_length=150)


def test_available_memory_reads_memavailable():
    with open("/proc/meminfo") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    assert abs(limits.available_memory() - kib * 1024) < 512 << 20  # the same figure, give or take churn


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1G"])
def test_a_bad_memory_limit_is_refused(bad):
    with pytest.raises(ValueError, match="memory limit must be a positive number of bytes"):
        limits.set_memory_limit(bad)
