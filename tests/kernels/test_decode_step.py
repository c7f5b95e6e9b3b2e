"""greedy_argmax: the reference and the cuda kernel against seqjit's CPU greedy step (the decoding
score processors, then numpy.argmax) on ties, NaN, +-inf, suppressed ids and the min_length ban.

The cuda block has 256 threads striding over V: V = 300 puts columns j and j + 256 on one thread.
"""
import numpy as np
import pytest

from seqjit import kernels
from seqjit.decoding import processors
from seqjit.kernels.decode_step import reference as ref

V = 300
EOS = 2


def _cpu_greedy(logits, suppressed, eos_id, step, min_length):
    """The CPU greedy step (seqjit.decoding.greedy without the fast path)."""
    scores = np.array(logits, dtype=logits.dtype, copy=True)
    if eos_id >= 0:
        processors.apply_min_length(scores, step, min_length, eos_id)
    processors.apply_suppressed(scores, list(suppressed))
    return np.argmax(scores, axis=-1)


def _hard_rows():
    """Rows whose answer depends on the tie, NaN and -inf rules; the comment says what numpy picks."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, V)).astype(np.float32)
    x[0, EOS] = 9.0                     # the end token is best: banned before min_length
    x[1, [10, 200]] = 7.0               # a tie across threads: 10
    x[2, [5, 261]] = 7.0                # a tie on one thread (5 and 5 + 256): 5
    x[3, [7, 150, 40]] = np.nan         # NaN at 7 (suppressed), 40 and 150: 40
    x[4] = -np.inf                      # every score -inf: 0
    x[5] = -np.inf
    x[5, [0, 9]] = 5.0                  # the only finite scores are suppressed: all -inf, 0
    x[6, [270, 100]] = np.inf           # +inf at 100 and 270: 100
    x[7, [3, 299]] = [np.nan, 8.0]      # NaN beats any number: 3
    return x


SUPPRESSED = [7, 0, 9]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reference_matches_the_cpu_greedy_step(dtype):
    x = _hard_rows().astype(dtype)
    for suppressed in ([], SUPPRESSED):
        for step, min_length in ((0, 0), (0, 3), (2, 3), (3, 3)):
            want = _cpu_greedy(x, suppressed, EOS, step, min_length)
            got = ref.greedy_argmax(x, suppressed=suppressed, eos_id=EOS, step=step, min_length=min_length)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, want, err_msg=f"{suppressed} step {step} min_length {min_length}")
    rng = np.random.default_rng(1)
    for _ in range(20):
        y = rng.standard_normal((3, 17)).astype(dtype)
        y[rng.random(y.shape) < 0.1] = rng.choice([np.nan, np.inf, -np.inf])
        ban = rng.choice(17, 3, replace=False).tolist()
        np.testing.assert_array_equal(ref.greedy_argmax(y, suppressed=set(ban), eos_id=4, step=0, min_length=1),
                                      _cpu_greedy(y, ban, 4, 0, 1))
    x = _hard_rows()
    assert ref.greedy_argmax(x, eos_id=-1, step=0, min_length=5)[0] == EOS  # -1: no end token to ban


def _cuda_or_skip():
    from seqjit.kernels import _cuda

    try:
        return kernels.get("greedy_argmax", backend="cuda"), _cuda
    except (kernels.KernelUnavailable, _cuda.CudaUnavailable) as exc:
        pytest.skip(f"no GPU and no CUDA simulator: {exc}")


def test_cuda_matches_the_cpu_greedy_step():
    f, _ = _cuda_or_skip()
    x = _hard_rows()
    want = _cpu_greedy(x, SUPPRESSED, EOS, 1, 3)
    assert want[0] != EOS and want.tolist()[1:] == [10, 5, 40, 0, 0, 100, 3]
    got = f(x, suppressed=SUPPRESSED, eos_id=EOS, step=1, min_length=3)
    assert isinstance(got, np.ndarray) and got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    out = np.full(2, -5, np.int64)
    assert f(x[:2], eos_id=EOS, step=3, min_length=3, out=out) is out  # the ban is over: the end token
    np.testing.assert_array_equal(out, [EOS, 10])


def test_cuda_device_arrays_stay_on_device():
    f, _cuda = _cuda_or_skip()
    x = _hard_rows()[1:4]
    dsup = _cuda.to_device(np.array([7, 1000], np.int32))  # device ids are not range-checked: 1000 matches nothing
    dout = _cuda.device_empty((3,), np.int64)
    assert f(_cuda.to_device(x), suppressed=dsup, out=dout) is dout
    np.testing.assert_array_equal(dout.copy_to_host(), _cpu_greedy(x, [7], -1, 0, 0))
    assert _cuda.is_device_array(f(_cuda.to_device(x[:1])))


@pytest.mark.parametrize("backend", ["reference", "cuda"])
def test_bad_input_is_named(backend):
    if backend == "cuda":
        f, _ = _cuda_or_skip()
    else:
        f = ref.greedy_argmax
    x = np.zeros((2, 5), np.float32)
    cases = [
        (TypeError, "logits must be a numpy.ndarray", lambda: f(x.tolist())),
        (ValueError, "logits must have 2 dimensions", lambda: f(x[0])),
        (TypeError, "logits must have dtype", lambda: f(x.astype(np.int32))),
        (ValueError, r"logits must have at least one column", lambda: f(x[:, :0])),
        (ValueError, r"suppressed must hold token ids in \[0, 4\]", lambda: f(x, suppressed=[5])),
        (ValueError, r"suppressed must hold token ids in \[0, 4\]", lambda: f(x, suppressed=[-1])),
        (TypeError, "suppressed must hold integers", lambda: f(x, suppressed=[1.0])),
        (ValueError, r"eos_id must lie in \[-1, 4\]", lambda: f(x, eos_id=5)),
        (ValueError, "eos_id must be >= -1", lambda: f(x, eos_id=-2)),
        (TypeError, "eos_id must be an integer", lambda: f(x, eos_id=True)),
        (ValueError, "step must be >= 0", lambda: f(x, step=-1)),
        (TypeError, "min_length must be an integer", lambda: f(x, min_length=1.5)),
        (ValueError, "out must be", lambda: f(x, out=np.zeros(3, np.int64))),
    ]
    if backend == "cuda":
        cases.append((TypeError, "logits must have dtype float32 on the cuda backend", lambda: f(x.astype(np.float64))))
    for exc, message, call in cases:
        with pytest.raises(exc, match=message):
            call()
