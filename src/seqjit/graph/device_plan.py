"""Plans on the GPU: where an executor bound to the cuda backend keeps constants, buffers and feeds.

:class:`DevicePlacement` is what :class:`~seqjit.graph.executor.Executor` consults when its backend is
``"cuda"``:

- ``constant(host)``: a graph constant (a weight, or an array derived from weights by a pass) as a
  device array, uploaded once per placement and shared by every graph and plan using it (a model
  keeps one placement for all its graphs: weights go up once);
- ``place(memory)``: the plan's memory (:mod:`seqjit.graph.memory`) with every slab a device buffer
  and every planned value a device view into one;
- ``maker(op)``: the op's cuda binding (:mod:`seqjit.graph.device_ops`);
- ``feed(x)`` / ``output(x, copy)``: feeds may be host arrays (uploaded, except scalars such as
  ``step``, which stay host values) or device arrays (used as they are); outputs stay device arrays
  with ``copy=False`` and come back as host copies with ``copy=True``.
"""
from __future__ import annotations

import threading

import numpy as np

from seqjit.graph.memory import MemoryPlan
from seqjit.kernels import _cuda


class DevicePlacement:
    """See the module docstring. Raises :class:`~seqjit.errors.CudaUnavailable` without a usable GPU."""

    def __init__(self):
        _cuda.require_cuda()
        self._constants: dict = {}  # id(host array) -> (host array, device array)
        self._lock = threading.Lock()

    # -- constants -------------------------------------------------------------------------------
    def constant(self, host):
        """``host`` on the device, uploaded on first use (keyed by the host array itself)."""
        if _cuda.is_device_array(host):
            return host
        hit = self._constants.get(id(host))
        if hit is not None and hit[0] is host:
            return hit[1]
        with self._lock:
            hit = self._constants.get(id(host))
            if hit is not None and hit[0] is host:
                return hit[1]
            device = _cuda.to_device(np.asarray(host))
            self._constants[id(host)] = (host, device)  # the host array kept: its id stays its own
            return device

    @property
    def constant_bytes(self) -> int:
        """Bytes of the constants uploaded so far."""
        return sum(int(h.nbytes) for h, _ in self._constants.values())

    # -- plans -----------------------------------------------------------------------------------
    def place(self, memory: MemoryPlan) -> MemoryPlan:
        """``memory`` with its slabs on the device: one device buffer per slab, the same views."""
        slabs = [_cuda.device_empty((n,), np.uint8) for n in memory.slab_bytes]
        views = {}
        for root, host_view in memory.views.items():
            dtype, shape = host_view.dtype, tuple(host_view.shape)
            nbytes = host_view.size * dtype.itemsize
            if nbytes == 0:
                views[root] = _cuda.device_empty(shape, dtype)
            else:
                views[root] = slabs[memory.slab_of[root]][:nbytes].view(dtype).reshape(shape)
        return MemoryPlan(views, dict(memory.slab_of), list(memory.slab_bytes), memory.value_bytes)

    @staticmethod
    def maker(op: str):
        from seqjit.graph import device_ops  # (imports numba.cuda: after require_cuda)
        from seqjit.graph.ops import get_op

        return device_ops.maker(get_op(op))

    @staticmethod
    def accepts(x) -> bool:
        return _cuda.is_device_array(x)

    @staticmethod
    def feed(x):
        """A host feed uploaded (with a host copy kept for checks: :func:`~seqjit.kernels._cuda.host_mirror`),
        a scalar kept on the host, a device feed as it is."""
        if isinstance(x, np.ndarray) and x.ndim > 0:
            return _cuda.to_device_mirrored(x)
        return x

    @staticmethod
    def output(x, copy: bool):
        if not copy:
            return x
        return _cuda.to_host(x) if _cuda.is_device_array(x) else np.array(x, copy=True)
