"""Where seqjit's greedy Marian decode spends its time, and how far it is from the memory floor.

    python benchmarks/decoding/profile_decode.py [--json out.json] [--reps 3] [--threads 2] [--batches 1,16]

For batch 1 and 16 (by default; 20-token sources, exactly 20 new tokens, 2 threads):

- ``wall``: median unprofiled ``generate`` time;
- one run under :func:`seqjit.graph.profile` with ``model.encode``/``model.step`` timed too, split
  into encoder, decoder-step kernels (sum of node times), per-step executor overhead (time in
  ``model.step`` minus its nodes: feeds, checks, plan lookup, the node loop) and the decoding loop
  (the rest: score processors, log-softmax, argmax, history);
- per-op and per-node tables of the decoder step;
- the fixed cost of a step: the same 6+6-layer graph with tiny sizes (d_model 64, vocab 128),
  whose kernels do next to nothing;
- the cost of switching between Numba's and BLAS's thread pools (:func:`pool_switch`);
- this machine's memory bandwidth (numpy copy of a 512 MB array; a 512 MB sum, 1 and 2 threads; a
  512 MB GEMV),
  peak GEMM rate, and the resulting floors per step: weights read per step / read bandwidth, and
  at batch 16 also 2 * batch * parameters / GEMM rate.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload as w  # noqa: E402


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def step_weight_bytes(model) -> int:
    """Bytes of the weights one decoder step reads: decoder layers (not the cross K/V projections,
    applied once by the encoder), the output projection and its bias."""
    total = 0
    for name, arr in model.weights.items():
        cross_kv = ".encoder_attn.k_proj." in name or ".encoder_attn.v_proj." in name
        if (name.startswith("decoder.") and not cross_kv) or name in ("shared.weight", "lm_head.weight", "final_logits_bias"):
            total += arr.nbytes
    return total


def breakdown(model, batch: int, reps: int) -> dict:
    import seqjit

    srcs = w.sources(batch)
    gen = lambda: model.generate(srcs, max_length=w.NEW_TOKENS, min_length=w.NEW_TOKENS, max_batch_size=batch)  # noqa: E731
    gen()  # warm-up: compiles, makes the plans
    wall = statistics.median(_timed(gen) for _ in range(reps))
    spent = {"encode": 0.0, "step": 0.0}
    for name in spent:
        orig = getattr(model, name)

        def timed(*a, _orig=orig, _name=name, **k):
            t0 = time.perf_counter()
            try:
                return _orig(*a, **k)
            finally:
                spent[_name] += time.perf_counter() - t0
        setattr(model, name, timed)
    try:
        with seqjit.graph.profile() as prof:
            profiled = _timed(gen)
    finally:
        del model.encode, model.step
    steps = w.NEW_TOKENS
    step_rec = [r for r in prof.records if r[0].startswith("decoder_step")]
    kernels = sum(r[4] for r in step_rec)
    ops, nodes = _tables(step_rec)
    return dict(batch=batch, wall_ms=1e3 * wall, tokens_per_s=batch * steps / wall, profiled_ms=1e3 * profiled,
                encoder_ms=1e3 * spent["encode"], step_kernels_ms=1e3 * kernels / steps,
                step_overhead_ms=1e3 * (spent["step"] - kernels) / steps,
                loop_overhead_ms=1e3 * (profiled - spent["encode"] - spent["step"]) / steps,
                nodes_per_step=len(step_rec) // steps, ops=ops, nodes=nodes)


def _tables(records) -> tuple:
    total = sum(r[4] for r in records) or 1e-30
    steps = w.NEW_TOKENS
    ops: dict = {}
    nodes: dict = {}
    for _, node, op, backend, t in records:
        key = f"{op} ({backend})"
        ops.setdefault(key, [0, 0.0])
        ops[key][0] += 1
        ops[key][1] += t
        nodes[node] = nodes.get(node, 0.0) + t
    op_rows = sorted(([k, c // steps, 1e3 * t / steps, 100 * t / total] for k, (c, t) in ops.items()), key=lambda r: -r[2])
    node_rows = sorted(([k, 1e3 * t / steps, 100 * t / total] for k, t in nodes.items()), key=lambda r: -r[1])
    return op_rows, node_rows[:12]


def tiny_step_cost(reps: int) -> dict:
    """ms per step of the same 6+6-layer Marian graph at d_model 64, ffn 64, vocab 128."""
    from seqjit.convert.hf_marian import marian_config
    from seqjit.models.transformer import TransformerConfig, TransformerModel

    hf = dict(w.MARIAN, vocab_size=128, d_model=64, encoder_ffn_dim=64, decoder_ffn_dim=64, pad_token_id=127,
              decoder_start_token_id=127)
    cfg = TransformerConfig.from_dict(marian_config(hf, "tiny"))
    rng = np.random.default_rng(0)
    weights = {n: (0.1 * rng.standard_normal(s.shape)).astype(s.dtype) for n, s in TransformerModel.weight_spec(cfg).items()}
    model = TransformerModel(cfg, weights)
    out = {}
    for batch in (1, 16):
        srcs = [[int(x) for x in rng.integers(3, 120, w.SRC_LEN)] for _ in range(batch)]
        state = model.start(np.array(srcs), max_length=w.NEW_TOKENS)
        tokens = np.full(batch, cfg.decoder_start_id, np.int64)

        def decode():
            state.step = 0
            for _ in range(w.NEW_TOKENS):
                model.step(state, tokens, copy=False)
        decode()
        out[batch] = 1e3 * min(_timed(decode) for _ in range(reps)) / w.NEW_TOKENS
    return out


def bandwidth(reps: int = 3) -> dict:
    """GB/s: numpy copy of 512 MB (read + write counted), a 512 MB read (sum, 1 and 2 threads), and
    a BLAS GEMV over a 512 MB [512, 262144] matrix (x @ A, 2 threads: the streaming read a step needs)."""
    x, A = np.ones(512, np.float32), np.ones((512, 1 << 18), np.float32)
    y = np.empty(A.shape[1], np.float32)
    np.dot(x, A, out=y)
    res = {"gemv_2t": A.nbytes / min(_timed(lambda: np.dot(x, A, out=y)) for _ in range(reps)) / 1e9}
    A = None  # frees the 512 MB (after a del, the lambda above would name an undefined A)
    a = np.ones(128 << 20, np.float32)
    b = np.empty_like(a)
    half = a.size // 2

    def two(fn):
        with ThreadPoolExecutor(2) as ex:
            list(ex.map(fn, (slice(0, half), slice(half, None))))

    for name, fn, moved in (
        ("copy_1t", lambda: np.copyto(b, a), 2 * a.nbytes),
        ("copy_2t", lambda: two(lambda s: np.copyto(b[s], a[s])), 2 * a.nbytes),
        ("read_1t", lambda: a.sum(), a.nbytes),
        ("read_2t", lambda: two(lambda s: a[s].sum()), a.nbytes),
    ):
        fn()
        res[name] = moved / min(_timed(fn) for _ in range(reps)) / 1e9
    return res


def pool_switch(n: int = 200) -> dict:
    """Median us of a tiny Numba ``prange`` loop, a BLAS GEMV [1536, 512] (a decoder layer's QKV),
    each alone and alternating, and of one threadpoolctl BLAS limit (the attention kernel takes one
    per call): alternating costs more than the sum when the two thread pools wait on each other."""
    from numba import njit, prange

    from seqjit.kernels.attention._blas import single_threaded_blas

    @njit(parallel=True, cache=False)
    def tiny(a):
        for i in prange(a.shape[0]):
            a[i] += 1.0

    rng = np.random.default_rng(0)
    a = np.zeros(16, np.float32)
    wgt, x = rng.standard_normal((1536, 512), dtype=np.float32), rng.standard_normal(512, dtype=np.float32)
    y = np.empty(1536, np.float32)
    cases = {"numba_prange": lambda: tiny(a), "blas_gemv": lambda: np.dot(wgt, x, out=y),
             "alternating": lambda: (tiny(a), np.dot(wgt, x, out=y)),
             "threadpoolctl_limit": lambda: single_threaded_blas().__exit__(None, None, None)}
    out = {}
    for name, fn in cases.items():
        fn()
        out[name] = 1e6 * statistics.median(_timed(fn) for _ in range(n))
    return out


def gemm_gflops(reps: int = 3) -> float:
    x = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    y = x @ x
    return 2 * 1024 ** 3 / min(_timed(lambda: np.matmul(x, x, out=y)) for _ in range(reps)) / 1e9


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=w.THREADS, help="for diagnosis; the report uses 2")
    p.add_argument("--batches", default="1,16", help="comma-separated batch sizes to profile")
    args = p.parse_args(argv)
    import seqjit

    w.set_threads()
    seqjit.set_num_threads(args.threads)
    model = seqjit.convert.from_hf(w.prepare_marian() / "hf")
    batches = [int(b) for b in args.batches.split(",")]
    res = dict(batches=[breakdown(model, b, args.reps) for b in batches], tiny_step_ms=tiny_step_cost(args.reps),
               bandwidth_GBps=bandwidth(), gemm_GFLOPs=gemm_gflops(), pool_switch_us=pool_switch())
    res["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY", "")
    res["step_weight_MB"] = step_weight_bytes(model) / 1e6
    res["step_params_M"] = res["step_weight_MB"] / 4
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    else:
        print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
