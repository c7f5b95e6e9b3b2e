"""Beam-search step kernels: candidate selection and hypothesis bookkeeping on the device, so a beam
search reorders its decoder state without sending scores or indices to the host."""
