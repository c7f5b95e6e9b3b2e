"""Decoding-step kernels: the token choice of a greedy step on the device (no logits to the host)."""
