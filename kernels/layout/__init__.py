"""Data-movement kernels a device-resident graph needs between the compute kernels: strided copy
(transposes, head split/merge, concatenation, KV-cache writes), broadcast add, fill, row gather
(beam reordering). The CPU path does these with NumPy (:mod:`.reference` is that NumPy)."""
