"""GPU execution on numba.cuda: a model moved with ``model.to("cuda")`` (or loaded with
``device="cuda"``) runs its graphs on device buffers and decodes on the device.

- :mod:`.devices`: the GPU's provider in the device registry (:mod:`seqjit.models.devices`);
- :mod:`.runtime`: starting and stepping a decode on the device, and its ``generate``;
- :mod:`.state`: the device decoder state (reordered on the device);
- :mod:`.greedy`, :mod:`.beam`, :mod:`.generate`: decoding loops that keep logits on the device.

Importing this package imports no CUDA; moving a model needs ``numba-cuda`` and a GPU, or
``NUMBA_ENABLE_CUDASIM=1`` for numba's simulator.
"""
from seqjit.models.devices import check_device

__all__ = ["check_device"]
