"""seqjit against OpenNMT-py's own ``Translator`` (greedy) on OpenNMT-py's default RNN: a brnn LSTM
encoder and an input-feeding LSTM decoder, 2 layers x 500, general attention, vocabularies of 8000
(issue 23's speed check: >= 5x at batch 1). Random weights built by OpenNMT-py's ``build_base_model``,
imported with ``seqjit.convert.from_opennmt``; both decode exactly ``--steps`` tokens (the end token
banned until then, no token banned otherwise, as OpenNMT-py does) and must give the same ids.

    python benchmarks/decoding/opennmt_rnn.py [--threads 1] [--steps 30] [--sources 32] [--profile]

One table: per batch size, ms per source for OpenNMT-py, seqjit float32 and seqjit int8
(``seqjit.quantize``: its ids are compared with float32's token by token, not required equal:
random weights give near-tied logits), the ratios, and seqjit's decoder step alone (generate minus
encode, per step) with the bandwidth it implies: the decoder weights one step reads (both LSTM
layers less the embedding's share of the first, which is gathered from a folded table, the
attentional layer, the output projection: 34 MB in float32) over the step time, and the same
products done by NumPy/BLAS alone as the floor. At
batch 1 a step is a chain of matrix-vector products, bound by that read bandwidth (this host: 16-30
GB/s from one core, ``benchmarks/results/gemm_decode_shapes.md``), so a float32 step cannot be
much faster than weights / bandwidth whatever the kernels; int8 reads a quarter of the bytes.

``--profile`` prints instead where OpenNMT-py's batch-1 translate spends its time (``torch.profiler``
over ``--sources`` sources: the top operators by self CPU time, per step) and its step time.

Needs OpenNMT-py 3.x (``pip install OpenNMT-py torch==<the installed version>``).
"""
from __future__ import annotations

import argparse
import io
import os
import time
import warnings

import numpy as np


def build(vocab: int):
    import pyonmttok
    import torch
    import onmt.opts as opts
    from onmt.model_builder import build_base_model
    from onmt.utils.parse import ArgumentParser

    parser = ArgumentParser()
    opts.model_opts(parser)
    opts._add_train_general_opts(parser)
    opts.distributed_opts(parser)  # 3.5: the encoder reads parallel_mode
    opt = parser.parse_known_args(["-encoder_type", "brnn", "-decoder_type", "rnn", "-rnn_type", "LSTM", "-layers", "2",
                                   "-hidden_size", "500", "-word_vec_size", "500"])[0]
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    specials = ["<unk>", "<blank>", "<s>", "</s>"]
    vocabs = {side: pyonmttok.build_vocab_from_tokens(specials + [f"{side}{i}" for i in range(vocab)])
              for side in ("src", "tgt")}
    vocabs["data_task"] = "seq2seq"
    vocabs["decoder_start_token"] = "<s>"  # 3.5's Translator starts the target with it
    torch.manual_seed(0)
    model = build_base_model(opt, vocabs)  # OpenNMT-py 3.5: no gpu argument
    with torch.no_grad():  # as its build_model draws them: the builder leaves some uninitialised (skip_init)
        for p in model.parameters():
            p.uniform_(-opt.param_init, opt.param_init)
    return model.eval(), vars(opt), vocabs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--sources", type=int, default=32)
    ap.add_argument("--length", type=int, default=20)
    ap.add_argument("--profile", action="store_true", help="profile OpenNMT-py's batch-1 translate instead")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    from onmt.translate import GNMTGlobalScorer
    from onmt.translate.translator import Translator

    import seqjit
    from seqjit.convert import from_opennmt
    torch.set_num_threads(args.threads)
    seqjit.set_num_threads(args.threads)
    onmt_model, opt, vocabs = build(8000)
    model = from_opennmt(onmt_model.state_dict(), opt)
    rng = np.random.default_rng(0)
    sources = [list(rng.integers(4, 8000, args.length)) for _ in range(args.sources)]
    scorer = GNMTGlobalScorer(alpha=0.0, beta=0.0, length_penalty="none", coverage_penalty="none")
    translator = Translator(onmt_model, vocabs, gpu=-1, beam_size=1, max_length=args.steps, min_length=args.steps,
                            global_scorer=scorer, report_score=False, out_file=io.StringIO(), n_best=1)

    def onmt(chunk):
        ids = torch.tensor(chunk)
        batch = {"src": ids.unsqueeze(-1), "srclen": torch.full((len(chunk),), args.length),
                 "indices": torch.arange(len(chunk))}
        return [[int(t) for t in p[0]] for p in translator.translate_batch(batch, attn_debug=False)["predictions"]]

    if args.profile:
        return profile_onmt(onmt, sources, args)

    def ours(chunk):
        return [r.ids[0] for r in model.generate(chunk, max_length=args.steps, min_length=args.steps)]

    int8 = seqjit.quantize(model, "int8")
    # the matrices a step reads: both LSTM layers, the attentional layer and the output projection,
    # less the embedding's columns of the first layer's input weight, which the lowering folds into a
    # table of projected embeddings (one row gathered per step: seqjit.graph.input_fold)
    Et = model.config.tgt_embed
    mats = [np.ascontiguousarray(a[:, Et:] if n == "decoder.rnn.weight_ih_l0" else a)
            for n, a in model.weights.items() if a.ndim == 2 and n.startswith("decoder.")
            and not n.startswith(("decoder.embedding", "decoder.attention"))]
    step_bytes = sum(a.nbytes for a in mats) + sum(a.nbytes for n, a in model.weights.items()
                                                   if n.startswith("decoder.") and a.ndim == 1)

    def blas_floor_ms() -> float:
        """The products of one batch-1 step done by NumPy/BLAS alone (x @ W.T over each decoder
        matrix a step reads, no cell or attention): the read-bound floor on this host now, best of 10."""
        xs = [np.ones((1, a.shape[1]), np.float32) for a in mats]
        best = float("inf")
        for _ in range(10):
            start = time.perf_counter()
            for a, x in zip(mats, xs):
                x @ a.T
            best = min(best, time.perf_counter() - start)
        return 1000 * best

    def ours_int8(chunk):
        return [r.ids[0] for r in int8.generate(chunk, max_length=args.steps, min_length=args.steps)]

    def step_ms(chunk) -> float:
        """seqjit's float32 decoder step (ms): (generate - encode) / steps, best of 3."""
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            model.generate(chunk, max_length=args.steps, min_length=args.steps)
            middle = time.perf_counter()
            model.encode(chunk)
            end = time.perf_counter()
            best = min(best, (middle - start) - (end - middle))
        return 1000 * best / args.steps

    print(f"OpenNMT-py default RNN (brnn LSTM 2x500, input feeding, general attention), {args.sources} sources of "
          f"{args.length} tokens, {args.steps} steps, {args.threads} thread(s), load {os.getloadavg()[0]:.2f}")
    print("| batch | OpenNMT-py ms/src | seqjit ms/src | x | same ids | seqjit int8 ms/src | x | int8 tokens = f32 "
          "| seqjit step ms | weights GB/s | GFLOP/s |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for batch in (1, 32):
        chunks = [sources[i:i + batch] for i in range(0, len(sources), batch)]
        onmt(chunks[0]), ours(chunks[0]), ours_int8(chunks[0])  # warm up
        times, results = {}, {}
        for name, fn in (("OpenNMT-py", onmt), ("seqjit", ours), ("int8", ours_int8)):
            start = time.perf_counter()
            results[name] = [ids for chunk in chunks for ids in fn(chunk)]
            times[name] = time.perf_counter() - start
        same = results["OpenNMT-py"] == results["seqjit"]
        pairs = [(a, b) for x, y in zip(results["seqjit"], results["int8"]) for a, b in zip(x, y)]
        agree = sum(a == b for a, b in pairs) / len(pairs)
        step = step_ms(chunks[0])
        ms = {k: 1000 * t / len(sources) for k, t in times.items()}
        print(f"| {batch} | {ms['OpenNMT-py']:.1f} | {ms['seqjit']:.1f} | {ms['OpenNMT-py'] / ms['seqjit']:.2f} | {same} "
              f"| {ms['int8']:.1f} | {ms['OpenNMT-py'] / ms['int8']:.2f} | {100 * agree:.0f}% | {step:.3f} "
              f"| {step_bytes / step / 1e6:.1f} | {2 * batch * step_bytes / 4 / step / 1e6:.0f} |")
    floor = blas_floor_ms()
    print(f"decoder weights read per step: {step_bytes / 1e6:.1f} MB (float32); NumPy/BLAS GEMVs over them (batch 1): "
          f"{floor:.3f} ms = {step_bytes / floor / 1e6:.1f} GB/s; load after: {os.getloadavg()[0]:.2f}")

def profile_onmt(onmt, sources, args) -> None:
    """Where OpenNMT-py's batch-1 greedy translate spends its time: torch.profiler's operators by self
    CPU time per decoder step, and the step time (translate minus its encoder, over the steps)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    onmt(sources[:1])  # warm up
    start = time.perf_counter()
    for s in sources:
        onmt([s])
    total = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for s in sources:
            onmt([s])
    steps = len(sources) * args.steps
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    profiled = sum(e.self_cpu_time_total for e in events)
    print(f"OpenNMT-py translate, batch 1, {len(sources)} sources x {args.steps} steps, {args.threads} thread(s), "
          f"load {os.getloadavg()[0]:.2f}: {1000 * total / len(sources):.1f} ms/source unprofiled")
    print("| operator | calls per step | self us per step | % of profiled self time |")
    print("|---|---:|---:|---:|")
    for e in events[:14]:
        print(f"| {e.key} | {e.count / steps:.1f} | {e.self_cpu_time_total / steps:.1f} | "
              f"{100 * e.self_cpu_time_total / profiled:.1f} |")
    enc = prof.key_averages()
    mm = sum(e.self_cpu_time_total for e in enc if e.key in ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul",
                                                                 "aten::linear", "aten::baddbmm"))
    print(f"matrix products (addmm/mm/bmm): {mm / steps:.1f} us per step of {profiled / steps:.1f} us profiled "
          f"({100 * mm / profiled:.0f}%); load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
