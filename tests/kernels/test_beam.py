"""The beam-search step kernels (beam_topk, beam_advance) of every CPU backend against the NumPy
reference (kernels/beam/reference.py), which follows decoding/beam.py: ties to the lower flat index,
NaN last, -inf and the -1e9 empty-beam score, inactive sources left alone, sources whose candidates
end, the early-stopping test. The cuda backend is checked in tests/gpu (device arrays).
"""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.kernels.beam import reference as ref

BACKENDS = [b for b in kernels.backends("beam_topk") if b not in ("reference", "cuda")]


def test_a_cpu_backend_is_built():
    assert "cython" in BACKENDS, "the cython beam kernels are not built"


def _logp(n_src, K, V, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_src * K, V)).astype(np.float32)
    x -= np.log(np.exp(x).sum(axis=1, keepdims=True))
    return x


def _hard_case(K=3, V=70):
    """Sources whose best candidates tie (within a row, across rows, across the 64-column blocks the
    native scan skips), hold NaN, -inf rows, and an empty beam (score -1e9)."""
    n_src = 6
    x = _logp(n_src, K, V, 0)
    rs = np.random.default_rng(1).uniform(-3, 0, (n_src, K)).astype(np.float32)
    x[0, [3, 65]] = 2.0                  # source 0: a tie inside a row, across a block boundary
    x[1, 5] = 2.0                        # ... and with row 1 (flat index V + 5 > 65)
    rs[0, :2] = 0.0
    x[3:6, :] = -np.inf                  # source 1: every total -inf but row 0's
    x[6, [1, 2]] = np.nan                # source 2: NaN totals rank last
    x[7] = np.nan
    rs[3] = [0.0, ref.NEG, ref.NEG]      # source 3: the first step, two empty beams
    x[12, :] = x[13, :] = x[14, :] = 0.5  # source 4: every candidate ties
    rs[4] = 0.0
    return x, rs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["hard", "random"])
@pytest.mark.parametrize("k2", [1, 2, 6, 9])
def test_beam_topk_matches_reference(backend, case, k2):
    x, rs = _hard_case() if case == "hard" else (_logp(5, 3, 200, 3), np.zeros((5, 3), np.float32))
    active = np.array([1, 1, 1, 1, 1, 0][:rs.shape[0]], np.int32)
    want = ref.beam_topk(x, rs, active, k2)
    got = kernels.get("beam_topk", backend)(x, rs, active, k2)
    act = active.astype(bool)
    np.testing.assert_array_equal(got[1][act], want[1][act])
    np.testing.assert_array_equal(got[0][act], want[0][act])


def _advance(fn, cand_scores, cand_index, V, t, max_len, eos, divisor, state):
    s = {k: v.copy() for k, v in state.items()}
    n_src, K = s["run_scores"].shape
    outs = dict(run_out=np.zeros_like(s["run"]), fin_out=np.zeros_like(s["fin"]), status=np.zeros(n_src, np.int64),
                src_rows=np.zeros(n_src * K, np.int64), tokens=np.zeros(n_src * K, np.int64))
    fn(cand_scores, cand_index, V, t, max_len, eos, divisor, s["run"], outs["run_out"], s["run_scores"], s["fin"],
       outs["fin_out"], s["fin_len"], s["fin_scores"], s["fin_done"], s["active"], outs["status"], outs["src_rows"],
       outs["tokens"])
    return s, outs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t", [0, 3, 7])
def test_beam_advance_matches_reference(backend, t):
    """Several steps of random candidates (ending tokens included) through both implementations."""
    rng = np.random.default_rng(t)
    n_src, K, V, max_len, eos = 7, 4, 9, 8, 2
    state = dict(run=rng.integers(0, V, (n_src, K, max_len)), fin=rng.integers(0, V, (n_src, K, max_len)),
                 run_scores=np.sort(rng.uniform(-5, 0, (n_src, K)).astype(np.float32))[:, ::-1].copy(),
                 fin_len=rng.integers(1, max_len, (n_src, K)), fin_scores=rng.uniform(-6, -1, (n_src, K)).astype(np.float32),
                 fin_done=rng.integers(0, 2, (n_src, K)).astype(np.int32), active=np.array([1, 1, 1, 0, 1, 1, 1], np.int32))
    state["fin_scores"][state["fin_done"] == 0] = ref.NEG
    x = _logp(n_src, K, V, t + 10)
    x[:, eos] += 1.0 * (t % 2)
    x[rng.random(x.shape) < 0.05] = -np.inf
    cand_scores, cand_index = ref.beam_topk(x, state["run_scores"], state["active"], 2 * K)
    divisor = np.float32((t + 1) ** 0.7)
    want_s, want = _advance(ref.beam_advance, cand_scores, cand_index, V, t, max_len, eos, divisor, state)
    got_s, got = _advance(kernels.get("beam_advance", backend), cand_scores, cand_index, V, t, max_len, eos,
                          divisor, state)
    act = state["active"].astype(bool)
    for key in ("run_scores", "fin_len", "fin_scores", "fin_done", "active"):
        np.testing.assert_array_equal(got_s[key], want_s[key], err_msg=key)
    for key in ("status", "src_rows", "tokens"):
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    # histories: positions <= t of the active sources are the meaningful ones
    for key in ("run_out", "fin_out"):
        np.testing.assert_array_equal(got[key][act][:, :, :t + 1], want[key][act][:, :, :t + 1], err_msg=key)
    assert want["status"][act].any(), "no source is improvable: the case tests little"


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_arguments_are_named(backend):
    topk = kernels.get("beam_topk", backend)
    x, rs = _logp(2, 3, 10, 0), np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="k2"):
        topk(x, rs, np.ones(2, np.int32), 31)
    with pytest.raises(ValueError, match="logp"):
        topk(x[:5], rs, np.ones(2, np.int32), 2)
    with pytest.raises(ValueError, match="run_scores"):
        topk(x, rs.astype(np.float64), np.ones(2, np.int32), 2)
