"""The Cython linear and attention kernels on scipy's OpenBLAS (the ``blas`` extra) against the same
kernels on the portable loops a default install (no scipy) runs (kernels/_sj_blas_fallback.h),
in one process, switched with ``_select_blas``; best of 5 after a warm-up call, one thread.

    python benchmarks/blas_fallback.py
"""
from __future__ import annotations

import time

import numpy as np

import seqjit
from seqjit.kernels.attention import cython_cpu as attention_cy
from seqjit.kernels.linear import cython_cpu as linear_cy


def best(fn, reps=5):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def cases():
    rng = np.random.default_rng(0)
    for rows, k, n in ((1, 512, 2048), (16, 512, 2048), (256, 512, 2048)):
        x = rng.standard_normal((rows, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        yield f"linear float32 [{rows}x{k}] @ [{n}x{k}]^T", lambda x=x, w=w: linear_cy.linear(x, w)
    q, kk, v = (rng.standard_normal((1, 8, 1024, 64)).astype(np.float32) for _ in range(3))
    yield "attention float32 [1, 8, 1024, 64]", lambda: attention_cy.attention(q, kk, v)
    yield "attention float32 causal", lambda: attention_cy.attention(q, kk, v, causal=True)


def main() -> int:
    seqjit.set_num_threads(1)
    print("| case | scipy OpenBLAS ms | fallback ms | fallback / OpenBLAS |")
    print("|---|---:|---:|---:|")
    for name, fn in cases():
        linear_cy._select_blas(True), attention_cy._select_blas(True)
        t_blas = best(fn)
        linear_cy._select_blas(False), attention_cy._select_blas(False)
        t_fb = best(fn)
        print(f"| {name} | {1e3 * t_blas:.2f} | {1e3 * t_fb:.2f} | {t_fb / t_blas:.2f}x |")
    linear_cy._select_blas(True), attention_cy._select_blas(True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
