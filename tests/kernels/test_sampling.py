"""kernels/sampling: the Philox4x32-10 stream (NumPy reference and C, against Random123's known
answers and each other) and the native row sampler (against ``processors.sample`` token for token,
and both against the exact distribution of ``kernels/sampling/reference.py``)."""
from types import SimpleNamespace

import numpy as np
import pytest

from seqjit.decoding import processors
from seqjit.graph import _native_vm
from seqjit.kernels.sampling import philox
from seqjit.kernels.sampling import reference as sampling_ref

# Random123 tests/kat_vectors, the philox4x32 10 lines: counter (4 words), key (2 words) -> output
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_philox_known_answers(ctr, key, want):
    assert philox.philox4x32(ctr, key).tolist() == want
    assert _native_vm.philox4x32(ctr, key) == want


def test_native_philox_equals_reference():
    """Random counters and keys (vectorised reference against one C call each), 7 and 10 rounds."""
    rng = np.random.default_rng(0)
    ctrs = rng.integers(0, 1 << 32, (300, 4), dtype=np.uint64).astype(np.uint32)
    keys = rng.integers(0, 1 << 32, (300, 2), dtype=np.uint64).astype(np.uint32)
    for rounds in (7, 10):
        want = philox.philox4x32(ctrs, keys, rounds)
        got = [_native_vm.philox4x32(c.tolist(), k.tolist(), rounds) for c, k in zip(ctrs, keys)]
        np.testing.assert_array_equal(np.array(got, np.uint32), want)


@pytest.mark.parametrize("seed,step", [(0, 0), (12345, 7), ((1 << 64) - 1, (1 << 33) + 5), (1 << 40, 255)])
def test_native_uniforms_equal_reference(seed, step):
    rows = np.array([0, 1, 2, 63, 1 << 32, (1 << 40) + 3, (1 << 63) - 1], np.int64)
    want = philox.uniforms(seed, rows, step)
    np.testing.assert_array_equal(_native_vm.philox_uniforms(seed, rows, step), want)
    # the layout of philox.py: counter (step lo, step hi, row lo, row hi), key (seed lo, seed hi)
    out = philox.philox4x32([step & 0xFFFFFFFF, step >> 32, int(rows[5]) & 0xFFFFFFFF, int(rows[5]) >> 32],
                            [seed & 0xFFFFFFFF, seed >> 32]).astype(np.uint64)
    assert want[5] == float(((int(out[0]) << 32 | int(out[1])) >> 11)) * 2.0 ** -53


def test_uniforms_look_uniform():
    """[0, 1), mean and deciles of 200k draws (rows x steps) within a few standard errors."""
    u = np.concatenate([philox.uniforms(99, np.arange(20000), t) for t in range(10)])
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / u.size)
    counts = np.bincount((u * 10).astype(int), minlength=10) / u.size
    assert np.all(np.abs(counts - 0.1) < 4 * np.sqrt(0.09 / u.size))
    assert len(np.unique(u)) == u.size


@pytest.mark.parametrize("seed", [-1, 1 << 64, 1.5, True, "1"])
def test_bad_seed_is_named(seed):
    with pytest.raises(ValueError, match="seed"):
        philox.uniforms(seed, [0], 0)


def _scores(rows, vocab, seed):
    """Random processed scores with banned (-inf) tokens and exact ties."""
    rng = np.random.default_rng(seed)
    s = (rng.normal(size=(rows, vocab)) * 2.5).astype(np.float32)
    s[rng.random(s.shape) < 0.1] = -np.inf
    s[:, 5] = s[:, 2]
    s[:, vocab - 1] = s[:, 0]
    return s


CASES = [(1.0, 0, 1.0), (0.7, 10, 1.0), (1.3, 0, 0.8), (1.0, 5, 0.6), (0.9, 100, 0.9), (1.0, 150, 1.0),
         (0.5, 2, 0.3), (2.0, 1000, 0.95), (1.0, 3, 1e-6)]


@pytest.mark.parametrize("temperature,topk,topp", CASES)
def test_native_row_sampler_equals_processors_sample(temperature, topk, topp):
    """Token for token, 4,000 rows of a 200-token vocabulary (top-k of 100 and 150 take the quickselect)."""
    scores = _scores(4000, 200, 3)
    rows = np.arange(4000) * 3 + 1
    opts = SimpleNamespace(sampling_temperature=temperature, sampling_topk=topk, sampling_topp=topp)
    want = processors.sample(scores.copy(), opts, philox.uniforms(17, rows, 4))
    got = _native_vm.sample_rows(scores, temperature, topk, topp, 17, rows, 4)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("temperature,topk,topp", [(1.0, 0, 0.9), (0.6, 0, 0.3), (1.2, 2000, 0.95), (1.0, 0, 1 - 1e-7)])
def test_nucleus_over_a_large_vocabulary(temperature, topk, topp):
    """Top-p over 20,000 tokens (the native sampler sorts only those that can be in the nucleus)."""
    scores = _scores(100, 20000, 4)
    rows = np.arange(100)
    opts = SimpleNamespace(sampling_temperature=temperature, sampling_topk=topk, sampling_topp=topp)
    want = processors.sample(scores.copy(), opts, philox.uniforms(8, rows, 2))
    np.testing.assert_array_equal(_native_vm.sample_rows(scores, temperature, topk, topp, 8, rows, 2), want)


@pytest.mark.parametrize("temperature,topk,topp", [(0.7, 3, 1.0), (1.3, 0, 1.0), (1.0, 4, 0.6), (1.0, 0, 0.7),
                                                   (1.0, 1, 1.0)])
def test_draws_follow_the_exact_distribution(temperature, topk, topp):
    """One score row drawn 40,000 times (rows x steps of the stream): only tokens the specification
    allows appear, each within 4.5 standard errors of its probability."""
    row = np.array([1.0, 2.5, -np.inf, 2.5, 0.2, 1.8, -0.5, 2.4], np.float32)  # a tie, a banned token
    want = sampling_ref.distribution(row, temperature, topk, topp)
    opts = SimpleNamespace(sampling_temperature=temperature, sampling_topk=topk, sampling_topp=topp)
    tiled = np.tile(row, (10000, 1))
    for draw in (lambda t: _native_vm.sample_rows(tiled, temperature, topk, topp, 5, np.arange(10000), t),
                 lambda t: processors.sample(tiled.copy(), opts, philox.uniforms(5, np.arange(10000), t))):
        tokens = np.concatenate([draw(t) for t in range(4)])
        freq = np.bincount(tokens, minlength=row.shape[0]) / tokens.size
        assert set(np.flatnonzero(freq)) <= set(np.flatnonzero(want))
        assert np.all(np.abs(freq - want) <= 4.5 * np.sqrt(want * (1 - want) / tokens.size) + 1e-12), (freq, want)


def test_row_sampler_checks_its_arguments():
    s = _scores(2, 10, 0)
    with pytest.raises(ValueError, match="temperature"):
        _native_vm.sample_rows(s, 0.0, 0, 1.0, 1, [0, 1], 0)
    with pytest.raises(ValueError, match="topk"):
        _native_vm.sample_rows(s, 1.0, -1, 1.0, 1, [0, 1], 0)
    with pytest.raises(ValueError, match="topp"):
        _native_vm.sample_rows(s, 1.0, 0, 1.5, 1, [0, 1], 0)
    with pytest.raises(ValueError, match="sources"):
        _native_vm.sample_rows(s, 1.0, 0, 1.0, 1, [0], 0)
