"""Check every kernel op's cuda backend against the NumPy reference and time it against the Numba CPU
backend and PyTorch on CUDA: one prepared script for a machine with an NVIDIA GPU.

    python benchmarks/gpu/check_and_time.py [--quick] [--ops linear,gru] [--out FILE] [--no-decode]

For each op in ``seqjit.kernels.ops()`` at a realistic size (``--quick``: tiny sizes, which also run
on numba's CUDA simulator, ``NUMBA_ENABLE_CUDASIM=1``): the reference result on host inputs, the cuda
result on the same host inputs (max abs error against the reference), then warm medians of
``--repeat`` calls of the cuda backend with device-resident inputs (host inputs when the op refuses
device ones: column ``io``), of the Numba CPU backend and of the torch op on CUDA (when
``torch.cuda.is_available()``). An op whose cuda backend is missing or fails is reported, not fatal.
Prints a markdown table (and writes it to ``--out``). Then, unless ``--no-decode`` (or ``--ops`` names a
subset), it runs ``decode_models.py`` (decoding tok/s of the tiny Transformer, the bundled G2P models
and Marian against transformers / PyTorch / CTranslate2 on CUDA) and appends its table.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from seqjit import kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_timing import device_name, median_ms  # noqa: E402

RNG = np.random.default_rng(0)


def _r(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _rnn_params(mode, inp, hidden):
    g = 3 if mode == "gru" else 4
    s = 1 / math.sqrt(hidden)
    return {"weight_ih_l0": _r(g * hidden, inp, scale=s), "weight_hh_l0": _r(g * hidden, hidden, scale=s),
            "bias_ih_l0": _r(g * hidden, scale=s), "bias_hh_l0": _r(g * hidden, scale=s)}


# ---- the cases: op -> (shape label, args, kwargs, torch peer or None) ------------------------------
# A torch peer is ``setup(torch, args as cuda tensors) -> fn()``: setup (modules, masks) is not timed.


def _cases(quick):
    q = quick
    cases = {}
    rows, n = (3, 37) if q else (256, 32000)
    x = _r(rows, n, scale=4)
    cases["softmax"] = (f"{rows}x{n}", (x,), {}, lambda t, a: lambda: t.softmax(a[0], -1))
    cases["log_softmax"] = (f"{rows}x{n}", (x,), {}, lambda t, a: lambda: t.log_softmax(a[0], -1))
    B, H, L, D = (1, 2, 20, 8) if q else (1, 8, 2048, 64)
    qkv = tuple(_r(B, H, L, D) for _ in range(3))
    cases["attention"] = (f"B={B} H={H} L={L} D={D} causal", qkv, {"causal": True},
                          lambda t, a: lambda: t.nn.functional.scaled_dot_product_attention(*a, is_causal=True))
    B, L, Dq, A, Dk = (2, 7, 5, 6, 4) if q else (64, 100, 512, 512, 1024)
    lengths = RNG.integers(1, L + 1, B)
    add_args = (_r(B, Dq), _r(B, L, A), _r(B, L, Dk), _r(A, Dq, scale=1 / math.sqrt(Dq)), _r(A))

    def additive_torch(t, a):
        query, kp, keys, wq, v = a
        drop = ~(t.arange(L, device=kp.device)[None, :] < t.as_tensor(lengths, device=kp.device)[:, None])

        def run():
            e = t.tanh((query @ wq.T)[:, None, :] + kp) @ v
            w = t.softmax(e.masked_fill(drop, float("-inf")), -1)
            return t.bmm(w[:, None, :], keys)[:, 0], w

        return run

    cases["additive_attention"] = (f"B={B} L={L} Dq={Dq} A={A} Dk={Dk}", add_args, {"lengths": lengths}, additive_torch)
    T, B, I, Hh = (3, 2, 5, 4) if q else (100, 32, 512, 512)
    for mode in ("gru", "lstm"):
        params = _rnn_params(mode, I, Hh)

        def rnn_torch(t, a, mode=mode, params=params):
            m = getattr(t.nn, mode.upper())(I, Hh).to(a[0].device)
            m.load_state_dict({k: t.from_numpy(v) for k, v in params.items()})
            return lambda: m(a[0])

        cases[mode] = (f"T={T} B={B} I={I} H={Hh}", (_r(T, B, I), params), {}, rnn_torch)
        cell_params = {k.replace("_l0", ""): v for k, v in params.items()}
        xs, hs = _r(B, I), _r(B, Hh)

        def cell_torch(t, a, mode=mode, cell_params=cell_params):
            m = getattr(t.nn, f"{mode.upper()}Cell")(I, Hh).to(a[0].device)
            m.load_state_dict({k: t.from_numpy(v) for k, v in cell_params.items()})
            return (lambda: m(a[0], a[1])) if mode == "gru" else (lambda: m(a[0], (a[1], a[2])))

        w = (params["weight_ih_l0"], params["weight_hh_l0"], params["bias_ih_l0"], params["bias_hh_l0"])
        cell_args = (xs, hs, *w) if mode == "gru" else (xs, hs, _r(B, Hh), *w)
        cases[f"{mode}_cell"] = (f"B={B} I={I} H={Hh}", cell_args, {}, cell_torch)
    rows, d = (5, 129) if q else (8192, 1024)
    cases["layer_norm"] = (f"{rows}x{d}", (_r(rows, d), _r(d), _r(d)), {},
                           lambda t, a, d=d: lambda: t.nn.functional.layer_norm(a[0], (d,), a[1], a[2]))
    m, k, n = (17, 19, 33) if q else (4096, 512, 2048)
    cases["linear"] = (f"{m}x{k}x{n} gelu", (_r(m, k), _r(n, k, scale=1 / math.sqrt(k)), _r(n)), {"activation": "gelu"},
                       lambda t, a: lambda: t.nn.functional.gelu(t.nn.functional.linear(*a)))
    shape = (3, 50) if q else (4096, 2048)
    xa = _r(*shape, scale=3)
    cases["relu"] = (f"{shape[0]}x{shape[1]}", (xa,), {}, lambda t, a: lambda: t.relu(a[0]))
    cases["gelu"] = (f"{shape[0]}x{shape[1]}", (xa,), {}, lambda t, a: lambda: t.nn.functional.gelu(a[0]))
    cases["silu"] = (f"{shape[0]}x{shape[1]}", (xa,), {}, lambda t, a: lambda: t.nn.functional.silu(a[0]))
    cases["tanh"] = (f"{shape[0]}x{shape[1]}", (xa,), {}, lambda t, a: lambda: t.tanh(a[0]))
    (b, l), vocab, d = ((2, 3), 11, 19) if q else ((64, 128), 32000, 512)
    ids = RNG.integers(0, vocab, (b, l))
    pos = kernels.get("sinusoidal_positions", backend="reference")(l, d, layout="halves")
    cases["embedding"] = (f"ids {b}x{l} V={vocab} D={d} +pos", (ids, _r(vocab, d), ), {"scale": math.sqrt(d), "positions": pos},
                          lambda t, a, d=d, pos=pos: (lambda p: lambda: t.nn.functional.embedding(a[0], a[1]) * math.sqrt(d) + p)(t.as_tensor(pos, device=a[1].device)))
    length, d = (6, 33) if q else (4096, 1024)
    cases["sinusoidal_positions"] = (f"{length}x{d} halves", (length, d), {"layout": "halves"}, None)
    return cases


# ---- helpers ------------------------------------------------------------------------------------


def _flat(result):
    """Every array of a result (nested tuples allowed), as host numpy arrays."""
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _flat(r)]
    if hasattr(result, "copy_to_host"):
        return [result.copy_to_host()]
    if hasattr(result, "detach"):
        return [result.detach().float().cpu().numpy()]
    return [np.asarray(result)]


def _map(obj, fn):
    if isinstance(obj, np.ndarray):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map(v, fn) for v in obj)
    return obj


def _fmt(v, digits=3):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:.{digits}g}" if abs(v) < 1e-2 else f"{v:.{digits}f}"


def run(ops, quick, repeat, log):
    from numba import cuda

    try:
        import torch

        torch_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        torch, torch_cuda = None, False
    from seqjit.kernels._cuda import to_device

    cases = _cases(quick)
    rows = []
    for op in ops:
        if op not in cases:
            rows.append(dict(op=op, shape="-", status="no case in this script"))
            continue
        shape, args, kwargs, peer = cases[op]
        row = dict(op=op, shape=shape, status="ok")
        rows.append(row)
        log(f"[{op}] {shape}")
        try:
            cuda_fn = kernels.get(op, backend="cuda")
        except Exception as exc:  # noqa: BLE001 - a missing backend is a result, not a crash
            row["status"] = f"missing ({type(exc).__name__}: {str(exc)[:80]})"
            continue
        try:
            want = _flat(kernels.get(op, backend="reference")(*args, **kwargs))
            got = _flat(cuda_fn(*args, **kwargs))
            err = max(float(np.max(np.abs(g.astype(np.float64) - w), initial=0)) for g, w in zip(got, want))
            scale = max(float(np.max(np.abs(w), initial=0)) for w in want)
            row.update(err=err, rel=err / max(scale, 1e-30))
            if row["rel"] > 1e-3 or any(g.shape != w.shape for g, w in zip(got, want)):
                row["status"] = "MISMATCH"
            dargs, dkw = _map(args, to_device), _map(kwargs, to_device)
            row["io"] = "device"
            try:
                cuda_fn(*dargs, **dkw)
            except Exception:  # noqa: BLE001 - some ops take host arrays only
                dargs, dkw, row["io"] = args, kwargs, "host"
            row["cuda_ms"] = median_ms(lambda: cuda_fn(*dargs, **dkw), repeat, cuda.synchronize)
        except Exception as exc:  # noqa: BLE001
            row["status"] = f"error ({type(exc).__name__}: {str(exc)[:80]})"
            log(traceback.format_exc())
            continue
        try:
            numba_fn = kernels.get(op, backend="numba")
            row["numba_ms"] = median_ms(lambda: numba_fn(*args, **kwargs), repeat, lambda: None)
        except Exception as exc:  # noqa: BLE001
            row["numba_ms"] = f"error: {type(exc).__name__}"
        if torch_cuda and peer is not None:
            try:
                targs = _map(args, lambda a: torch.as_tensor(a, device="cuda"))
                with torch.no_grad():
                    row["torch_ms"] = median_ms(peer(torch, targs), repeat, torch.cuda.synchronize)
            except Exception as exc:  # noqa: BLE001
                row["torch_ms"] = f"error: {type(exc).__name__}"
    return rows


def table(rows, header_lines):
    out = list(header_lines)
    out.append("| op | shape | status | max abs err | rel err | io | cuda ms | numba ms | torch-cuda ms | numba/cuda | torch/cuda |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c, nb, tc = r.get("cuda_ms"), r.get("numba_ms"), r.get("torch_ms")
        speed_nb = nb / c if isinstance(c, float) and isinstance(nb, float) and c > 0 else None
        speed_tc = tc / c if isinstance(c, float) and isinstance(tc, float) and c > 0 else None
        out.append(
            f"| {r['op']} | {r['shape']} | {r['status']} | {_fmt(r.get('err'))} | {_fmt(r.get('rel'))} | {r.get('io', '-')} | "
            f"{_fmt(c)} | {_fmt(nb)} | {_fmt(tc)} | {_fmt(speed_nb, 2)} | {_fmt(speed_tc, 2)} |"
        )
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (also runs on the CUDA simulator)")
    parser.add_argument("--ops", default="", help="comma-separated subset of ops (default: every op)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per engine (median)")
    parser.add_argument("--out", default="", help="also write the markdown table to this file")
    parser.add_argument("--no-decode", action="store_true", help="skip the decoding benchmark (decode_models.py)")
    args = parser.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o] or kernels.ops()
    unknown = sorted(set(ops) - set(kernels.ops()))
    if unknown:
        parser.error(f"unknown ops {unknown}; known: {kernels.ops()}")
    device = device_name()
    t0 = time.perf_counter()
    rows = run(ops, args.quick, args.repeat, lambda m: print(m, file=sys.stderr, flush=True))
    import torch

    header = [
        f"# seqjit cuda check ({'quick' if args.quick else 'full'} sizes)", "",
        f"device: {device}; torch {torch.__version__} (cuda available: {torch.cuda.is_available()}); "
        f"warm median of {args.repeat}; total {time.perf_counter() - t0:.0f} s. "
        "numba = Numba CPU backend on this machine's cores; rel err = max abs err / max |reference|.", "",
    ]
    text = table(rows, header)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    status = 1 if any(r["status"] == "MISMATCH" for r in rows) else 0
    if not args.no_decode and not args.ops:
        import subprocess
        here = Path(__file__).resolve().parent
        cmd = [sys.executable, str(here / "decode_models.py")] + (["--quick"] if args.quick else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        print(done.stdout, end="")
        sys.stderr.write(done.stderr[-4000:])
        if args.out:
            with open(args.out, "a") as f:
                f.write("\n" + done.stdout)
        status = status or done.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
