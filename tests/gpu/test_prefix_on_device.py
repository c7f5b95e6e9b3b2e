"""``target_prefix`` in the device greedy and sampling loops (numba's simulator without a GPU): the
prefix forced per row by a device kernel, then free decoding; the ids and scores of the CPU's native
decode (itself tested against transformers and CTranslate2 in tests/decoding/test_target_prefix.py)
for sources with prefixes of mixed lengths, none, one holding the end token, one as long as
max_length; beam search likewise, but for a prefix holding the end token, which it declines
(pinned here)."""
import numpy as np
import pytest

import seqjit
from seqjit.decoding import prefix as prefixes
from seqjit.decoding.strategy import choose
from seqjit.gpu import generate as device_generate

from .conftest import cuda_or_skip, tiny_models

EOS = 2
MAX_LENGTH = 4
SOURCES = [[3, 4, 5], [6, 7], [8], [9, 10, 11], [12, 4]]
PREFIXES = [[5, 6], None, [7, EOS, 9], [], [4, 4, 4, EOS]]


@pytest.fixture(scope="module")
def pair():
    cuda_or_skip()
    cpu, gpu = tiny_models()["transformer"], tiny_models()["transformer"]
    return cpu, gpu.to("cuda")


@pytest.fixture
def device_loops(monkeypatch):
    """The prefixes each call of the device greedy loop got."""
    seen, real = [], device_generate.greedy_search

    def loop(model, state, opts, suppressed, sources=None, prefix=None):
        seen.append(prefix)
        return real(model, state, opts, suppressed, sources, prefix)
    monkeypatch.setattr(device_generate, "greedy_search", loop)
    return seen


@pytest.mark.parametrize("options", [dict(), dict(min_length=3), dict(sampling_topk=0, seed=3),
                                     dict(sampling_topk=3, sampling_temperature=0.7, seed=4)])
def test_device_greedy_forces_the_prefix_as_the_cpu(pair, device_loops, options):
    cpu, gpu = pair
    options = dict(max_length=MAX_LENGTH, return_scores=True, target_prefix=PREFIXES, **options)
    assert choose(cpu, seqjit.decoding.DecodingOptions(**options).validate(), rows=len(SOURCES)).path == "runner"
    want = cpu.generate(SOURCES, **options)
    got = gpu.generate(SOURCES, max_batch_size=3, **options)
    assert len(device_loops) == 2 and all(p is not None for p in device_loops)  # two batches, on the device
    for i, (a, b, p) in enumerate(zip(got, want, PREFIXES)):
        assert a.ids == b.ids, f"source {i}"
        assert a.ids[0][:len(p or [])] == list(p or [])
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-5, err_msg=f"source {i}")
    assert got[4].ids[0] == PREFIXES[4]  # a prefix as long as max_length is the hypothesis, its end token kept


def test_a_suppressed_prefix_token_is_still_forced(pair, device_loops):
    """The prefix is forced last, over the suppressed tokens and the min_length ban, as on the CPU."""
    cpu, gpu = pair
    options = dict(max_length=MAX_LENGTH, return_scores=True, target_prefix=[[EOS, 5], [5]], suppress_tokens=[5],
                   min_length=3)
    want, got = cpu.generate(SOURCES[:2], **options), gpu.generate(SOURCES[:2], **options)
    assert device_loops
    assert [r.ids for r in got] == [r.ids for r in want]
    assert got[0].ids[0][:2] == [EOS, 5]
    np.testing.assert_allclose([r.scores for r in got], [r.scores for r in want], rtol=0, atol=1e-5)


@pytest.mark.parametrize("options", [dict(), dict(length_penalty=1.0, num_hypotheses=2, min_length=2)])
def test_device_beam_search_forces_the_prefix_as_the_cpu(pair, monkeypatch, options):
    """Every beam of a source forced on the device; the CPU native beam search's hypotheses and scores.
    A prefix holding the end token is declined by name (the CPU loops on the device model run it)."""
    cpu, gpu = pair
    seen, real = [], device_generate.beam_search
    monkeypatch.setattr(device_generate, "beam_search", lambda *a: seen.append(a[4]) or real(*a))
    plain = [p if EOS not in (p or []) else p[:1] for p in PREFIXES]
    plain[4] = [4, 4, 4, 5]  # as long as max_length
    options = dict(beam_size=2, max_length=MAX_LENGTH, return_scores=True, target_prefix=plain, **options)
    want, got = cpu.generate(SOURCES, **options), gpu.generate(SOURCES, max_batch_size=3, **options)
    assert len(seen) == 2 and all(p is not None for p in seen)
    for i, (a, b, p) in enumerate(zip(got, want, plain)):
        assert a.ids == b.ids, f"source {i}"
        assert all(h[:len(p or [])] == list(p or []) for h in a.ids)
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-5, err_msg=f"source {i}")
    spec = seqjit.decoding.DecodingOptions(beam_size=2, target_prefix=([5, EOS], None)).validate()
    choice = choose(gpu, spec, rows=2)
    assert choice.path != "device" and "a target_prefix holding the end token in beam search" in choice.why


def test_prefix_kernels_match_the_reference(pair):
    """force_prefix / prefix_running against their references, and the reference against the CPU
    loop's processor (seqjit.decoding.prefix.force)."""
    from seqjit.kernels import _cuda
    from seqjit.kernels.decode_step import cuda as dk
    from seqjit.kernels.decode_step import reference as ref

    rows = prefixes.prefix_rows(((5, 6), (), (7, EOS, 9), ()))
    scores = np.random.default_rng(2).standard_normal((4, 11)).astype(np.float32)
    for t in range(4):
        want = scores.copy()
        prefixes.force(want, prefixes.at(rows, t))
        np.testing.assert_array_equal(ref.force_prefix(scores.copy(), rows, t), want)
        got = dk.force_prefix(_cuda.to_device(scores), _cuda.to_device(rows), t).copy_to_host()
        np.testing.assert_array_equal(got, want)
        done = np.ones(4, np.int32)
        want_done = ref.prefix_running(done.copy(), rows, t)
        assert want_done.tolist() == [int(not (t < rows.shape[1] and rows[r, t] >= 0)) for r in range(4)]
        np.testing.assert_array_equal(dk.prefix_running(_cuda.to_device(done), _cuda.to_device(rows), t).copy_to_host(),
                                      want_done)
