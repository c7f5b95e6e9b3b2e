"""The native decode loops' log-softmax kernels, on each instruction-set variant, against NumPy's
float64 log-softmax: the beam step's row (kernels/activations/native_act_body.h: log_softmax_f32,
through ``_native_vm.log_softmax_rows``) at lengths around the 16- and 8-lane blocks with -inf
entries, and on special rows against the Python decoding loop's log-softmax
(seqjit.decoding.processors): +inf entries sharing probability one, a row of only -inf, a NaN row
reported and left untouched; and the greedy and sampling loops' score normaliser (lse_f32)."""
import numpy as np
import pytest

from seqjit.decoding import processors
from seqjit.graph import _native_vm


def _reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("v", [1, 7, 8, 15, 16, 17, 33, 1000, 58101])
def test_matches_float64_numpy(isa, v):
    rng = np.random.default_rng(v)
    x = (rng.standard_normal((3, v)) * 4).astype(np.float32)
    x[1, :: max(2, v // 5)] = -np.inf  # some tokens banned, never all
    if v == 1:
        x[1, 0] = 1.5
    want = _reference(x)
    got = x.copy()
    assert _native_vm.log_softmax_rows(got) == []
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=2e-6)
    assert np.array_equal(np.isneginf(got), np.isneginf(want))


def test_special_rows(isa):
    v = 37
    x = np.zeros((4, v), np.float32)
    x[0, [3, 20, 36]] = np.inf  # +inf: those three share probability one
    x[1, 5] = np.nan            # NaN: reported, untouched
    x[2] = -np.inf              # only -inf
    x[3, 10] = 2.0              # an ordinary row last
    before = x.copy()
    assert _native_vm.log_softmax_rows(x) == [1]
    want = processors.log_softmax(before[[0, 2, 3]])  # the Python decoding loop's (NumPy)
    np.testing.assert_array_equal(x[0], want[0])
    np.testing.assert_array_equal(x[1], before[1])
    np.testing.assert_array_equal(x[2], want[1])
    assert np.isneginf(x[2]).all()  # stays -inf: nothing left (the loops raise NothingGenerable), not NaN
    np.testing.assert_allclose(x[3], want[2], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(x[3], _reference(before[3:4])[0], rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("v", [1, 7, 8, 15, 16, 17, 1000, 58101])
def test_scores_normaliser_matches_float64_numpy(isa, v):
    """The greedy and sampling loops' log(sum exp(row - max)) (activations/native_act_body.h:
    lse_f32, through ``_native_vm.log_sum_exp_rows``), -inf entries included."""
    rng = np.random.default_rng(100 + v)
    x = (rng.standard_normal((3, v)) * 4).astype(np.float32)
    x[1, :: max(2, v // 5)] = -np.inf
    if v == 1:
        x[1, 0] = -2.5
    lse, top = _native_vm.log_sum_exp_rows(x)
    m = x.astype(np.float64).max(axis=1)
    np.testing.assert_array_equal(top, x.max(axis=1))
    np.testing.assert_allclose(lse, np.log(np.exp(x - m[:, None]).sum(axis=1)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("v", [1, 15, 16, 17, 1000])
def test_nan_reported_wherever_it_sits(isa, v):
    """A NaN is reported and its row left untouched whatever else the row holds: finite entries
    (found through the sum of exp), +inf (the max is +inf), only -inf (the max is -inf), NaN alone,
    and in the lanes' block or the tail past it."""
    rows = []
    for fill in (0.5, np.inf, -np.inf, np.nan):
        for at in sorted({0, v // 2, v - 1}):
            row = np.full(v, -np.inf, np.float32)
            row[:: 2] = 0.25  # finite entries, or replaced below
            if fill != 0.5:
                row[:] = -np.inf if fill == -np.inf else row
                if fill == np.inf:
                    row[0 if at else v - 1] = np.inf
                if fill != fill:
                    row[:] = np.nan
            row[at] = np.nan
            rows.append(row)
    x = np.stack(rows)
    before = x.copy()
    assert _native_vm.log_softmax_rows(x) == list(range(len(rows)))
    np.testing.assert_array_equal(x, before)
