"""One thread setting for Numba, the Cython kernels' OpenMP loops and BLAS."""
import numba
import pytest
from threadpoolctl import threadpool_info

import seqjit


def test_set_num_threads_sets_numba_blas_and_openmp():
    try:
        assert seqjit.set_num_threads(1) == 1
        assert numba.get_num_threads() == 1
        assert seqjit.get_num_threads() == 1  # what the Cython kernels pass to prange(num_threads=)
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
    finally:
        default = seqjit.set_num_threads(None)
    assert default == seqjit.kernels._threads.default_num_threads()
    assert numba.get_num_threads() == min(default, numba.config.NUMBA_NUM_THREADS)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises((ValueError, TypeError), match="num_threads"):
        seqjit.set_num_threads(bad)


def test_import_seqjit_is_light():
    import subprocess
    import sys

    code = "import sys, seqjit; print(any(m in sys.modules for m in ('numba', 'torch', 'scipy')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
