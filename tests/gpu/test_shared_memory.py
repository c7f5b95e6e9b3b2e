"""Block-shared arrays are shared by every thread of a block (one per line, two lines two arrays), also
on numba's simulator, where tests/cuda_simulator.py allocates them under a lock: without it a thread
switch inside the simulator's allocation handed threads of one block different arrays, and the
attention RNNs' block reductions gave wrong logits now and then (see that module)."""
import sys

import numpy as np
from numba import cuda, float32  # a module global: the simulator swaps it in the kernel's globals

from .conftest import SIMULATOR, cuda_or_skip


def test_every_thread_of_a_block_sees_one_array_per_line():
    cuda_or_skip()
    if SIMULATOR:
        from numba.cuda.simulator import kernelapi

        assert getattr(kernelapi.FakeCUDAShared.array, "_seqjit_locked", False), "the lock is not in place"
    threads = 32

    @cuda.jit
    def kernel(out):
        a = cuda.shared.array(32, float32)
        b = cuda.shared.array(32, float32)
        t = cuda.threadIdx.x
        a[t] = t
        b[t] = 100 + t
        cuda.syncthreads()
        out[cuda.blockIdx.x, t] = a[threads - 1 - t] + b[t]  # another thread's write to a, ours to b

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: where the race showed
    try:
        for _ in range(3):
            out = np.zeros((4, threads), np.float32)
            kernel[4, threads](out)
            want = (threads - 1 - np.arange(threads)) + 100 + np.arange(threads)
            np.testing.assert_array_equal(out, np.broadcast_to(want, out.shape).astype(np.float32))
    finally:
        sys.setswitchinterval(old)
