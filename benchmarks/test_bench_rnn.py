"""Recurrent kernels: seqjit numba and cython vs torch, float32, 2 threads, in the same run.

    python -m pytest benchmarks/test_bench_rnn.py --benchmark-enable --benchmark-only -q \
        --benchmark-columns=median,iqr,rounds --benchmark-sort=name

Groups: ``gru T=100 B=<B>`` / ``lstm T=100 B=<B>`` (input = hidden = 512, one layer, vs
``nn.GRU`` / ``nn.LSTM`` under ``torch.inference_mode``), ``gru_cell B=1`` / ``lstm_cell B=1``
(vs ``nn.GRUCell`` / ``nn.LSTMCell``) and ``additive_attention B=<B> L=50 A=256`` (Dq = Dk = 512,
vs the torch eager formula).
"""
import numpy as np
import pytest
import torch

import seqjit
from seqjit import kernels

THREADS = 2
ENGINES = ["numba", "cython", "torch"]
T, SIZE = 100, 512


@pytest.fixture(autouse=True)
def _two_threads():
    torch.set_num_threads(THREADS)
    seqjit.set_num_threads(THREADS)


def _module(cls):
    torch.manual_seed(0)
    return cls(SIZE, SIZE).eval()


def _params(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def _torch_call(module, *args):
    def run():
        with torch.inference_mode():
            return module(*args)

    return run


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("B", [1, 32])
@pytest.mark.parametrize("mode", ["gru", "lstm"])
def test_sequence(benchmark, mode, B, engine):
    module = _module(torch.nn.GRU if mode == "gru" else torch.nn.LSTM)
    x = np.random.default_rng(0).standard_normal((T, B, SIZE), dtype=np.float32)
    if engine == "torch":
        run = _torch_call(module, torch.from_numpy(x))
    else:
        f, params = kernels.get(mode, backend=engine), _params(module)
        run = lambda: f(x, params)  # noqa: E731
    run()  # compile / warm up
    benchmark.group = f"{mode} T={T} B={B} I=H={SIZE}"
    benchmark.extra_info.update(engine=engine, threads=THREADS)
    benchmark(run)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("op", ["gru_cell", "lstm_cell"])
def test_cell(benchmark, op, engine):
    module = _module(torch.nn.GRUCell if op == "gru_cell" else torch.nn.LSTMCell)
    rng = np.random.default_rng(0)
    x, h, c = (rng.standard_normal((1, SIZE), dtype=np.float32) for _ in range(3))
    if engine == "torch":
        state = torch.from_numpy(h) if op == "gru_cell" else (torch.from_numpy(h), torch.from_numpy(c))
        run = _torch_call(module, torch.from_numpy(x), state)
    else:
        f, p = kernels.get(op, backend=engine), _params(module)
        w = (p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"])
        run = (lambda: f(x, h, *w)) if op == "gru_cell" else (lambda: f(x, h, c, *w))
    run()
    benchmark.group = f"{op} B=1 I=H={SIZE}"
    benchmark.extra_info.update(engine=engine, threads=THREADS)
    benchmark(run)


def _torch_additive(query, keys_proj, keys, w_q, v, lengths):
    q, kp, k, w, vv = (torch.from_numpy(a) for a in (query, keys_proj, keys, w_q, v))
    keep = torch.arange(kp.shape[1])[None, :] < torch.from_numpy(lengths)[:, None]

    def run():
        with torch.inference_mode():
            scores = torch.tanh((q @ w.T)[:, None, :] + kp) @ vv
            weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
            return torch.bmm(weights[:, None, :], k)[:, 0], weights

    return run


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("B", [1, 16])
def test_additive_attention(benchmark, B, engine):
    L, A = 50, 256
    rng = np.random.default_rng(0)
    query = rng.standard_normal((B, SIZE), dtype=np.float32)
    keys_proj = rng.standard_normal((B, L, A), dtype=np.float32)
    keys = rng.standard_normal((B, L, SIZE), dtype=np.float32)
    w_q = rng.standard_normal((A, SIZE), dtype=np.float32) * SIZE**-0.5
    v = rng.standard_normal(A, dtype=np.float32)
    lengths = rng.integers(L // 2, L + 1, B)
    lengths[0] = L
    if engine == "torch":
        run = _torch_additive(query, keys_proj, keys, w_q, v, lengths)
    else:
        f = kernels.get("additive_attention", backend=engine)
        run = lambda: f(query, keys_proj, keys, w_q, v, lengths=lengths)  # noqa: E731
    run()
    benchmark.group = f"additive_attention B={B} L={L} A={A} Dq=Dk={SIZE}"
    benchmark.extra_info.update(engine=engine, threads=THREADS)
    benchmark(run)
