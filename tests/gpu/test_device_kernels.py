"""The device-only kernels of the GPU path against their NumPy references: layout (strided copy,
broadcast add, fill, row gather, views), the decoding processors and greedy bookkeeping (whose
references are themselves checked against ``seqjit.decoding.processors``), the beam-search step
(chained over several steps, with ties, ended candidates and frozen sources), and the sampler (its
draws' frequencies against the CPU sampler's distribution)."""
import numpy as np
import pytest

from seqjit.decoding import processors
from seqjit.kernels.sampling import philox

from .conftest import cuda_or_skip

RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def k():
    cuda_or_skip()
    from seqjit.kernels import _cuda
    from seqjit.kernels.beam import cuda as beam_cuda
    from seqjit.kernels.beam import reference as beam_ref
    from seqjit.kernels.decode_step import cuda as dec_cuda
    from seqjit.kernels.decode_step import reference as dec_ref
    from seqjit.kernels.layout import cuda as lay_cuda
    from seqjit.kernels.layout import reference as lay_ref
    from seqjit.kernels.sampling import cuda as samp_cuda
    from seqjit.kernels.sampling import reference as samp_ref

    class K:
        pass

    ns = K()
    ns.cu, ns.lay, ns.lay_ref, ns.dec, ns.dec_ref, ns.beam, ns.beam_ref, ns.samp, ns.samp_ref = (
        _cuda, lay_cuda, lay_ref, dec_cuda, dec_ref, beam_cuda, beam_ref, samp_cuda, samp_ref)
    return ns


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- layout ---------------------------------------------------------------------------------------
def test_copy_reads_and_writes_strided_views(k):
    x = _f(2, 3, 4, 5)
    dx = k.cu.to_device(x)
    src = k.cu.permute_view(dx, (0, 2, 1, 3))  # a transpose, read where it lies
    out = k.cu.device_empty((2, 4, 3, 5), np.float32)
    np.testing.assert_array_equal(k.lay.copy(src, out).copy_to_host(), k.lay_ref.copy(x.transpose(0, 2, 1, 3), np.empty((2, 4, 3, 5), np.float32)))
    cache = k.lay.zeros((2, 3, 6, 5), np.float32)  # a KV-cache write at t = 4
    k.lay.copy(dx[:, :, 1:2, :], cache[:, :, 4:5, :])
    want = np.zeros((2, 3, 6, 5), np.float32)
    want[:, :, 4:5] = x[:, :, 1:2]
    np.testing.assert_array_equal(cache.copy_to_host(), want)
    five = k.cu.to_device(_f(2, 1, 3, 1, 4))  # > 4 axes with size-1 ones
    out5 = k.cu.device_empty((2, 1, 3, 1, 4), np.float32)
    np.testing.assert_array_equal(k.lay.copy(five, out5).copy_to_host(), five.copy_to_host())


def test_add_broadcasts_and_fill_and_gather(k):
    a, b = _f(3, 1, 4), _f(5, 1)
    out = k.cu.device_empty((3, 5, 4), np.float32)
    k.lay.add(k.cu.to_device(a), k.cu.to_device(b), out)
    np.testing.assert_array_equal(out.copy_to_host(), k.lay_ref.add(a, b, np.empty((3, 5, 4), np.float32)))
    ints = k.cu.device_empty((2, 3), np.int64)
    np.testing.assert_array_equal(k.lay.fill(ints, 7).copy_to_host(), np.full((2, 3), 7))
    src = _f(4, 2, 3)
    index = np.array([3, 3, 0, 1, 2])
    got = k.lay.gather_rows(k.cu.to_device(src), k.cu.to_device(index), k.cu.device_empty((5, 2, 3), np.float32))
    np.testing.assert_array_equal(got.copy_to_host(), k.lay_ref.gather_rows(src, index, np.empty((5, 2, 3), np.float32)))


def test_views_never_copy_and_refuse_what_needs_a_copy(k):
    x = _f(2, 3, 8)
    dx = k.cu.to_device(x)
    cols = dx[:, :, 2:6]  # a column slice: strided
    assert not k.cu.is_c_contiguous(cols) and k.cu.is_c_contiguous(dx[1:2])
    heads = k.cu.reshape_view(cols, (2, 3, 2, 2))
    np.testing.assert_array_equal(heads.copy_to_host(), x[:, :, 2:6].reshape(2, 3, 2, 2))
    with pytest.raises(ValueError, match="cannot be viewed as \\[2, 12\\] without a copy"):
        k.cu.reshape_view(cols, (2, 12))
    np.testing.assert_array_equal(k.cu.broadcast_view(k.cu.to_device(x[0, 0]), (3, 8)).copy_to_host(),
                                  np.broadcast_to(x[0, 0], (3, 8)))


# -- decoding processors ----------------------------------------------------------------------------
def _history(start, tokens, t):
    return np.concatenate([np.full((tokens.shape[0], 1), start), tokens[:, :t]], axis=1)


def test_processor_references_are_the_cpu_processors(k):
    scores = _f(4, 11)
    tokens = np.array([[3, 3, 5, 3], [4, 6, 4, 6], [1, 1, 1, 1], [9, 2, 9, 2]])
    for t in (0, 1, 4):
        hist = _history(1, tokens, t)
        want = scores.copy()
        processors.apply_repetition_penalty(want, hist, 1.7)
        np.testing.assert_array_equal(k.dec_ref.repetition_penalty(scores.copy(), 1, tokens, t, 1.7), want)
        for n in (1, 2, 3):
            want = scores.copy()
            processors.apply_no_repeat_ngram(want, hist, n)
            np.testing.assert_array_equal(k.dec_ref.no_repeat_ngram(scores.copy(), 1, tokens, t, n), want)
    want = scores.copy()
    processors.apply_min_length(want, 0, 2, 2)
    processors.apply_suppressed(want, (0, 7))
    np.testing.assert_array_equal(k.dec_ref.ban_tokens(scores.copy(), np.array([0, 7]), 2), want)
    chosen = np.array([2, 5, 0, 7])
    total = np.zeros(4)
    k.dec_ref.greedy_advance(scores, chosen, 2, 0, np.zeros(4, np.int32), np.zeros((4, 3), np.int64), total)
    np.testing.assert_allclose(total, processors.token_log_probs(scores, chosen), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the row of -inf: NaN, as on the CPU
def test_processor_kernels_match_the_references(k):
    scores = _f(4, 11)
    scores[2, :] = -np.inf  # a row with nothing left
    tokens = np.array([[3, 3, 5, 3], [4, 6, 4, 6], [1, 1, 1, 1], [9, 2, 9, 2]])
    dtok = k.cu.to_device(tokens)
    for t in (0, 3):
        got = k.dec.repetition_penalty(k.cu.to_device(scores), 1, dtok, t, 1.7).copy_to_host()
        np.testing.assert_array_equal(got, k.dec_ref.repetition_penalty(scores.copy(), 1, tokens, t, 1.7))
        for n in (1, 2, 3):
            got = k.dec.no_repeat_ngram(k.cu.to_device(scores), 1, dtok, t, n).copy_to_host()
            np.testing.assert_array_equal(got, k.dec_ref.no_repeat_ngram(scores.copy(), 1, tokens, t, n))
    got = k.dec.ban_tokens(k.cu.to_device(scores), k.cu.to_device(np.array([0, 7])), 2).copy_to_host()
    np.testing.assert_array_equal(got, k.dec_ref.ban_tokens(scores.copy(), np.array([0, 7]), 2))
    chosen = np.array([2, 5, 0, 7])
    for with_scores in (False, True):
        done0 = np.array([0, 1, 0, 0], np.int32)
        want_done, want_hist, want_total = done0.copy(), np.zeros((4, 3), np.int64), np.full(4, 0.5)
        k.dec_ref.greedy_advance(scores, chosen, 2, 1, want_done, want_hist, want_total if with_scores else None)
        done, hist = k.cu.to_device(done0), k.lay.zeros((4, 3), np.int64)
        total = k.cu.to_device(np.full(4, 0.5)) if with_scores else None
        k.dec.greedy_advance(k.cu.to_device(scores), k.cu.to_device(chosen), 2, 1, done, hist, total)
        np.testing.assert_array_equal(done.copy_to_host(), want_done)
        np.testing.assert_array_equal(hist.copy_to_host(), want_hist)
        if with_scores:
            np.testing.assert_allclose(total.copy_to_host(), want_total, rtol=1e-6)


# -- beam search step -------------------------------------------------------------------------------
def test_beam_step_kernels_match_the_reference_over_several_steps(k):
    n_src, K, V, max_len, eos = 3, 2, 7, 4, 2
    host = dict(run_scores=np.tile(np.array([0.0, -1e9], np.float32), (n_src, 1)),
                run=[np.zeros((n_src, K, max_len), np.int64) for _ in range(2)],
                fin=[np.zeros((n_src, K, max_len), np.int64) for _ in range(2)],
                fin_len=np.zeros((n_src, K), np.int64), fin_scores=np.full((n_src, K), -1e9, np.float32),
                fin_done=np.zeros((n_src, K), np.int32), active=np.ones(n_src, np.int32),
                status=np.zeros(n_src, np.int64), src_rows=np.zeros(n_src * K, np.int64),
                tokens=np.zeros(n_src * K, np.int64))
    dev = {n: ([k.cu.to_device(a) for a in v] if isinstance(v, list) else k.cu.to_device(v)) for n, v in host.items()}
    for t in range(max_len):
        logp = processors.log_softmax(_f(n_src * K, V) * 2)
        logp[0, 3] = logp[0, 4]  # a tie inside one source's candidates
        logp[2, eos] = 0.0  # source 1: its first beam ends at once
        if t == 1:
            host["active"][2] = 0  # a frozen source is left alone
            dev["active"] = k.cu.to_device(host["active"])
        want_s, want_i = k.beam_ref.beam_topk(logp, host["run_scores"], host["active"], 2 * K)
        got_s, got_i = k.cu.device_empty((n_src, 2 * K), np.float32), k.cu.device_empty((n_src, 2 * K), np.int64)
        k.beam.beam_topk(k.cu.to_device(logp), dev["run_scores"], dev["active"], 2 * K, got_s, got_i)
        act = host["active"] != 0
        np.testing.assert_array_equal(got_i.copy_to_host()[act], want_i[act])
        np.testing.assert_array_equal(got_s.copy_to_host()[act], want_s[act])
        cur = t % 2
        divisor = np.float32((t + 1) ** 0.8)
        k.beam_ref.beam_advance(want_s, want_i, V, t, max_len, eos, divisor, host["run"][cur], host["run"][1 - cur],
                                host["run_scores"], host["fin"][cur], host["fin"][1 - cur], host["fin_len"],
                                host["fin_scores"], host["fin_done"], host["active"], host["status"],
                                host["src_rows"], host["tokens"])
        k.beam.beam_advance(got_s, got_i, V, t, max_len, eos, divisor, dev["run"][cur], dev["run"][1 - cur],
                            dev["run_scores"], dev["fin"][cur], dev["fin"][1 - cur], dev["fin_len"], dev["fin_scores"],
                            dev["fin_done"], dev["active"], dev["status"], dev["src_rows"], dev["tokens"])
        for name in ("run_scores", "fin_len", "fin_scores", "fin_done", "active", "status", "src_rows"):
            np.testing.assert_array_equal(dev[name].copy_to_host(), host[name], err_msg=f"{name} at step {t}")
        live = np.repeat(act, K)
        np.testing.assert_array_equal(dev["tokens"].copy_to_host()[live], host["tokens"][live])
        for name in ("run", "fin"):
            got, want = dev[name][1 - cur].copy_to_host(), host[name][1 - cur]
            np.testing.assert_array_equal(got[act, :, :t + 1], want[act, :, :t + 1], err_msg=f"{name} at step {t}")


# -- sampling -------------------------------------------------------------------------------------------
def test_device_draw_equals_the_philox_reference(k):
    """The sampler's draw, compiled by numba in nopython mode (the uint64 typing a device build uses),
    is kernels/sampling/philox.py's, bit for bit."""
    import numba

    draw = numba.njit(k.samp.philox_uniform)
    for seed in (0, 11, (1 << 64) - 1, 0x123456789ABCDEF):
        for step in (0, 5, (1 << 33) + 1):
            rows = [0, 1, 47, 1 << 32, (1 << 62) + 9]
            got = [draw(seed & 0xFFFFFFFF, seed >> 32, r, step) for r in rows]
            np.testing.assert_array_equal(got, philox.uniforms(seed, rows, step))


@pytest.mark.parametrize("temperature,topk,topp", [(0.7, 3, 1.0), (1.3, 0, 1.0), (1.0, 4, 0.6)])
def test_sampler_draws_from_the_cpu_samplers_distribution(k, temperature, topk, topp):
    """Many rows of one score row: only tokens the CPU sampler can draw appear, at its frequencies, and
    each is the token the CPU sampler draws with the same (seed, source row, step)."""
    row = np.array([1.0, 2.5, -np.inf, 2.5, 0.2, 1.8], np.float32)  # a tie, a banned token
    want = k.samp_ref.distribution(row, temperature, topk, topp)
    from types import SimpleNamespace

    opts = SimpleNamespace(sampling_temperature=temperature, sampling_topk=topk, sampling_topp=topp)
    cpu = processors.sample(np.tile(row, (20000, 1)), opts, np.random.default_rng(0).random(20000))
    np.testing.assert_allclose(np.bincount(cpu, minlength=row.shape[0]) / cpu.shape[0], want, atol=0.015)  # the CPU sampler
    rows, calls = 48, 6
    scores = k.cu.to_device(np.tile(row, (rows, 1)))
    sources = k.cu.to_device(np.arange(rows, dtype=np.int64) * 3)
    out = k.cu.device_empty((rows,), np.int64)
    draws = np.concatenate([k.samp.sample_rows(scores, temperature=temperature, topk=topk, topp=topp, seed=11,
                                              sources=sources, step=t, out=out).copy_to_host() for t in range(calls)])
    counts = np.bincount(draws, minlength=row.shape[0]) / draws.shape[0]
    assert set(np.flatnonzero(counts)) <= set(np.flatnonzero(want))
    sigma = np.sqrt(want * (1 - want) / draws.shape[0])
    assert np.all(np.abs(counts - want) <= 4 * sigma + 1e-9), (counts, want)
    # the CPU samplers' stream: the tokens processors.sample draws with the same (seed, source, step)
    want_tokens = np.concatenate([processors.sample(np.tile(row, (rows, 1)), opts,
                                                    philox.uniforms(11, np.arange(rows) * 3, t)) for t in range(calls)])
    np.testing.assert_array_equal(draws, want_tokens)
