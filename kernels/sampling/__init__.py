"""Sampling a token per row on the device (temperature, top-k, top-p), as the CPU sampler draws."""
