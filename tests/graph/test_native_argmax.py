"""The native greedy loop's token choice (kernels/sampling/native_argmax.h, vectorised per instruction
set) against numpy.argmax: the first maximum, on rows of every length around the vector blocks, with
ties, signed zeros, infinities and banned tokens; a NaN anywhere raises NonFiniteLogits."""
import numpy as np
import pytest

from seqjit.errors import NonFiniteLogits, NothingGenerable
from seqjit.graph import _native_vm


def _first_tokens(logits: np.ndarray, banned=(), eos: int = 0, min_length: int = 0) -> np.ndarray:
    """The token greedy() picks at step 0 for each row of ``logits`` (a step program that does nothing)."""
    empty = _native_vm.Program(0)
    empty.finish([])
    b = logits.shape[0]
    ids = np.zeros((b, 2), np.int64)
    _native_vm.greedy(empty, empty, logits, np.zeros(b, np.int64), np.zeros((), np.int64), ids,
                      np.zeros(b, np.int64), np.zeros(0), np.array(sorted(banned), np.int64), eos, min_length, 0, 1)
    return ids[:, 0]


def _rows(rng, n: int) -> np.ndarray:
    """Rows of width n: random, few distinct values (ties), signed zeros, -inf but for one entry,
    +inf twice. (A row of only -inf has no token to choose: NothingGenerable, tested below.)"""
    rows = [rng.standard_normal(n), rng.integers(0, 4, n).astype(float), np.where(rng.random(n) < 0.5, -0.0, 0.0),
            np.full(n, -np.inf), rng.standard_normal(n)]
    rows[3][n // 2] = -1e30
    rows[4][rng.integers(0, n, 2)] = np.inf
    return np.array(rows, np.float32)


@pytest.mark.parametrize("n", [1, 3, 15, 16, 63, 64, 65, 130, 257, 1000, 58101])
def test_first_maximum_as_numpy(isa, n):
    rng = np.random.default_rng(n)
    logits = _rows(rng, n)
    expect = logits.argmax(axis=1)
    np.testing.assert_array_equal(_first_tokens(logits.copy()), expect)


def test_the_maximum_late_in_the_row_and_in_the_tail(isa):
    rng = np.random.default_rng(1)
    for n, at in [(200, 199), (200, 130), (200, 127), (200, 0), (4099, 4098), (4099, 17)]:
        row = rng.standard_normal((1, n)).astype(np.float32)
        row[0, at] = 10.0
        row[0, (at * 7 + 3) % n] = 10.0  # a tie: the first wins
        assert _first_tokens(row.copy())[0] == row.argmax()


def test_banned_and_end_tokens_are_never_chosen(isa):
    logits = _rows(np.random.default_rng(2), 300)
    top = logits.argmax(axis=1)
    out = _first_tokens(logits.copy(), banned=set(int(t) for t in top[:2]), eos=int(top[4]), min_length=1)
    edited = logits.copy()
    edited[:, top[:2]] = -np.inf
    edited[:, top[4]] = -np.inf
    np.testing.assert_array_equal(out, edited.argmax(axis=1))


@pytest.mark.parametrize("n", [1, 16, 65, 1000])
def test_a_row_of_only_minus_inf_raises_nothing_generable(isa, n):
    logits = np.random.default_rng(4).standard_normal((3, n)).astype(np.float32)
    logits[1] = -np.inf
    with pytest.raises(NothingGenerable, match="decoding step 0: row 1 has no token left"):
        _first_tokens(logits)
    if n > 1:
        logits = np.random.default_rng(5).standard_normal((2, n)).astype(np.float32)
        logits[1, 1:] = -np.inf  # only token 0 left, banned: nothing
        with pytest.raises(NothingGenerable, match="row 1"):
            _first_tokens(logits, banned={0}, eos=n - 1)


@pytest.mark.parametrize("at", [0, 5, 64, 255, 299])
def test_nan_anywhere_raises(isa, at):
    logits = np.random.default_rng(3).standard_normal((3, 300)).astype(np.float32)
    logits[1, at] = np.nan
    with pytest.raises(NonFiniteLogits):
        _first_tokens(logits)
