"""Sampling a token per row (temperature, top-k, top-p): the distribution (``reference.py``), the one
random stream every sampler draws from (``philox.py``, ``native_philox.h``), the native row sampler
(``_native.pxi``, run by the replay VM) and the device sampler (``cuda.py``)."""
