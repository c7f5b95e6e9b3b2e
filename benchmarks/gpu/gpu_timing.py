"""What the GPU benchmark scripts of this folder share: a timed median and the device's name."""
from __future__ import annotations

import os
import statistics
import time


def median_ms(fn, repeat, sync):
    """The median wall time of ``fn()`` in ms over ``repeat`` runs after one warm-up, ``sync()``
    (the device's synchronize) closing each run."""
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def device_name() -> str:
    """The current CUDA device's name, "CUDA simulator", or "no device (why)"."""
    from numba import cuda

    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "CUDA simulator"
    try:
        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:  # noqa: BLE001
        return f"no device ({exc})"
