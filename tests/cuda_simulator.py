"""A fix, for the tests, of a race in numba's CUDA simulator (numba-cuda 0.x, ``FakeCUDAShared.array``).

The simulator runs each CUDA thread of a block as a Python thread, and ``cuda.shared.array`` gives all
of them one NumPy array, found by the calling line in a per-block dict: look up, and on a miss create
and store. The look-up and the store are not under a lock, so when the interpreter switches threads
between them, two threads of one block each create their own "shared" array, and a block reduction
(kernels/_cuda_reduce.py) then sums or compares values that never meet: a wrong result, now and then.
Measured with the attention RNNs' teacher-forced logits on the simulator (60-100 runs each, switch
interval 10 us): without the lock 1-3 wrong runs in 60; with it 0 in 100; and every wrong run was a
run in which some block's threads were handed two different arrays for one line.

:func:`lock_shared_allocation` puts the look-up and the store under one lock. The key is numba's:
the caller's file name and line number (taken from its frame, which is also cheaper than numba's
``traceback.extract_stack``). Nothing changes on a real GPU: this is used only when the simulator is.

:func:`short_switch_interval`: the simulator's block manager polls its threads while holding the GIL,
so at Python's default 5 ms switch interval every ``syncthreads`` costs milliseconds; the CUDA tests
run at 100 us (tests/gpu: 220 s -> 74 s on a loaded 2-core host), which the lock makes safe.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading

import numpy as np

_lock = threading.Lock()


def lock_shared_allocation() -> bool:
    """Patch the simulator's ``FakeCUDAShared.array`` (once); False when the simulator has no such class."""
    try:
        from numba.cuda import types
        from numba.cuda.np import numpy_support
        from numba.cuda.simulator import kernelapi
    except ImportError:
        return False
    shared = getattr(kernelapi, "FakeCUDAShared", None)
    if shared is None or getattr(shared.array, "_seqjit_locked", False):
        return shared is not None
    unlocked = shared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory (no look-up), or numba's error
            return unlocked(self, shape, dtype, alignment)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with _lock:
            found = self._allocations.get(caller)
            if found is None:
                if isinstance(dtype, types.Type):
                    dtype = numpy_support.as_dtype(dtype)
                found = self._allocations[caller] = np.empty(shape, dtype)
        return found

    array._seqjit_locked = True
    shared.array = array
    return True


@contextlib.contextmanager
def short_switch_interval(seconds: float = 1e-4):
    """Python's thread switch interval set to ``seconds`` inside, on the simulator only."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        yield
        return
    old = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(old)
