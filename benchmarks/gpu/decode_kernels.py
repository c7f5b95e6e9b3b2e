"""The cuda kernels at decode shapes: each new path against the kernel it replaces, checked and timed.

    python benchmarks/gpu/decode_kernels.py [--quick] [--repeat N] [--out FILE]
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu/decode_kernels.py --quick --repeat 1   # no GPU: runs, times mean nothing

- linear, M = 1 / 4 / 16 rows (a decode step of batch 1-16), d_model 512 projections, an FFN and a
  Marian-sized vocabulary projection: the GEMV kernels against the 64 x 64 tiled GEMM (forced by
  setting ``GEMV_MAX_ROWS = 0``), both weight layouts.
- attention, Lq = 1 over a KV cache with per-row lengths, batch 1 / 16 / 64, 8 heads of 64: the
  split-K decode kernel against the row-wise kernel (forced by setting ``DEC_DMAX = 0``).
- greedy_argmax over V = 58101 (+ one suppressed id): the device kernel against copying the logits to
  the host and numpy.argmax.

Every input is device-resident and every output preallocated on the device (what a decode loop
does); times are warm medians of ``--repeat`` calls with a device synchronise. Each case is first
checked against the NumPy reference (``MISMATCH`` above 1e-4 relative; exit code 1). A PyTorch CUDA
column is added when ``torch.cuda.is_available()``.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from seqjit import kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_timing import median_ms  # noqa: E402

RNG = np.random.default_rng(0)


def _r(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _forced(module, name, value, fn):
    """``fn`` run with ``module.name = value`` (a host-side dispatch constant), restored after."""
    def run():
        old = getattr(module, name)
        setattr(module, name, value)
        try:
            return fn()
        finally:
            setattr(module, name, old)
    return run


def _cases(quick):
    """(family, label, reference result, new path fn, old path fn, torch peer or None)."""
    from seqjit.kernels import _cuda
    from seqjit.kernels.attention import cuda as attention_cuda
    from seqjit.kernels.linear import cuda as linear_cuda

    dev = _cuda.to_device
    cases = []
    shapes = [(1, 16, 24), (16, 33, 70)] if quick else [(m, k, n) for m in (1, 4, 16)
                                                            for k, n in ((512, 512), (512, 2048), (2048, 512), (512, 58101))]
    for m, k, n in shapes:
        x, w, b = _r(m, k), _r(n, k, scale=1 / math.sqrt(k)), _r(n)
        want = kernels.get("linear", backend="reference")(x, w, b)
        for layout in ("out_in", "in_out"):
            wl = w if layout == "out_in" else np.ascontiguousarray(w.T)
            dx, dw, db, dout = dev(x), dev(wl), dev(b), _cuda.device_empty((m, n), np.float32)
            new = lambda dx=dx, dw=dw, db=db, dout=dout, layout=layout: linear_cuda.linear(dx, dw, db, weight_layout=layout, out=dout)
            old = _forced(linear_cuda, "GEMV_MAX_ROWS", 0, new)
            peer = (lambda t, x=x, w=w, b=b: (lambda a: lambda: t.nn.functional.linear(*a))(
                [t.as_tensor(v, device="cuda") for v in (x, w, b)])) if layout == "out_in" else None
            cases.append(("linear", f"M={m} K={k} N={n} {layout}", want, new, old, peer))
    shapes = [(2, 2, 40, 8)] if quick else [(b, 8, lk, 64) for b in (1, 16, 64) for lk in (32, 256, 2048)]
    for B, H, Lk, D in shapes:
        q, k, v = _r(B, H, 1, D), _r(B, H, Lk, D), _r(B, H, Lk, D)
        lengths = RNG.integers(max(1, Lk // 2), Lk + 1, B)
        want = kernels.get("attention", backend="reference")(q, k, v, lengths=lengths)
        dq, dk, dv, dlen = dev(q), dev(k), dev(v), dev(lengths)
        dout = _cuda.device_empty((B, H, 1, D), np.float32)
        new = lambda dq=dq, dk=dk, dv=dv, dlen=dlen, dout=dout: attention_cuda.attention(dq, dk, dv, lengths=dlen, out=dout)
        old = _forced(attention_cuda, "DEC_DMAX", 0, new)

        def peer(t, q=q, k=k, v=v, lengths=lengths, Lk=Lk):
            a = [t.as_tensor(z, device="cuda") for z in (q, k, v)]
            mask = t.arange(Lk, device="cuda")[None, None, None, :] < t.as_tensor(lengths, device="cuda")[:, None, None, None]
            return lambda: t.nn.functional.scaled_dot_product_attention(*a, attn_mask=mask)
        cases.append(("attention", f"Lq=1 B={B} H={H} Lk={Lk} D={D} lengths", want, new, old, peer))
    shapes = [(3, 40)] if quick else [(1, 58101), (16, 58101), (64, 58101)]
    argmax = kernels.get("greedy_argmax", backend="cuda")
    for rows, vocab in shapes:
        logits = _r(rows, vocab, scale=3)
        want = kernels.get("greedy_argmax", backend="reference")(logits, suppressed=[vocab - 1])
        dlogits, dsup, dids = dev(logits), dev(np.array([vocab - 1])), _cuda.device_empty((rows,), np.int64)
        new = lambda dl=dlogits, ds=dsup, di=dids: argmax(dl, suppressed=ds, out=di)

        def old(dl=dlogits, vocab=vocab):
            host = dl.copy_to_host()
            host[:, vocab - 1] = -np.inf
            return np.argmax(host, axis=-1)

        def peer(t, logits=logits, vocab=vocab):
            a = t.as_tensor(logits, device="cuda")
            return lambda: a.index_fill(1, t.tensor([vocab - 1], device="cuda"), -math.inf).argmax(-1).cpu()
        cases.append(("greedy_argmax", f"R={rows} V={vocab}", want, new, old, peer))
    return cases


def _host(result):
    return result.copy_to_host() if hasattr(result, "copy_to_host") else np.asarray(result)


def run(quick, repeat, log):
    from numba import cuda

    try:
        import torch

        torch_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        torch, torch_cuda = None, False
    rows = []
    for family, label, want, new, old, peer in _cases(quick):
        log(f"[{family}] {label}")
        row = dict(family=family, shape=label, status="ok")
        rows.append(row)
        scale = max(float(np.max(np.abs(want), initial=0)), 1e-30)
        errs = [float(np.max(np.abs(_host(fn()).astype(np.float64) - want), initial=0)) / scale for fn in (new, old)]
        row["rel_err"] = max(errs)
        if row["rel_err"] > 1e-4:
            row["status"] = "MISMATCH"
        row["new_ms"] = median_ms(new, repeat, cuda.synchronize)
        row["old_ms"] = median_ms(old, repeat, cuda.synchronize)
        if torch_cuda and peer is not None:
            with torch.no_grad():
                row["torch_ms"] = median_ms(peer(torch), repeat, torch.cuda.synchronize)
    return rows


def table(rows):
    cols = ["family", "shape", "status", "rel_err", "new_ms", "old_ms", "speedup", "torch_ms"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if "new_ms" in r and r.get("old_ms"):
            r["speedup"] = f"{r['old_ms'] / r['new_ms']:.2f}x"
        cells = []
        for c in cols:
            v = r.get(c, "-")
            cells.append(f"{v:.3g}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes (the simulator)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    from seqjit.kernels._cuda import require_cuda

    require_cuda()
    rows = run(args.quick, args.repeat, lambda s: print(s, file=sys.stderr, flush=True))
    text = ("new = the decode-shape kernel (GEMV / split-K decode attention / device argmax); old = the kernel "
            "it replaces at that shape (tiled GEMM / row-wise attention / copy to host + numpy.argmax)\n\n" + table(rows))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 1 if any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
