"""Decoding-step kernels: the token choice of a greedy step, the score processors and the greedy
bookkeeping, on the device (a decode loop sends back only the chosen ids)."""
