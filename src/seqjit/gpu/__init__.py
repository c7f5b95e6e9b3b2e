"""GPU execution on numba.cuda: device-resident forward passes built from the cuda kernels.

Imported only on request (``import seqjit.gpu``); needs ``numba-cuda`` and a GPU, or
``NUMBA_ENABLE_CUDASIM=1`` for the simulator.
"""
from .encoder import DeviceTransformerEncoder

__all__ = ["DeviceTransformerEncoder"]
