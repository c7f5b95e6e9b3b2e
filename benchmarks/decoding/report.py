"""Markdown for the decoding benchmark: throughput tables, engine agreement, seqjit's profile."""
from __future__ import annotations

import workload as w

TARGETS = {1: 1.2, 16: 1.5}  # seqjit / CTranslate2 wanted by the issue
SJ, SJP = "seqjit", "seqjit+passive"


def _index(benches) -> dict:
    """(model, engine, batch) -> (tokens/s, median s, rounds, ids)."""
    out = {}
    for b in benches:
        info, med = b["extra_info"], b["stats"]["median"]
        tps = info["batch"] * info["new_tokens"] / med
        out[(info["model"], info["engine"], info["batch"])] = (tps, med, b["stats"]["rounds"], info["ids"])
    return out


def _cell(idx, key) -> str:
    return f"{idx[key][0]:.1f} ({1e3 * idx[key][1]:.0f} ms, {idx[key][2]} r)" if key in idx else "-"


def _ratio(idx, a, b) -> str:
    return f"{idx[a][0] / idx[b][0]:.2f}x" if a in idx and b in idx else "-"


def _agreement(idx, model, engines, batch) -> str:
    runs = [(e, idx[(model, e, batch)][3]) for e in engines if (model, e, batch) in idx]
    if len(runs) < 2:
        return "-"
    ref = runs[0][1]
    notes = []
    for e, ids in runs[1:]:
        bad = [i for i, (x, y) in enumerate(zip(ref, ids)) if x != y]
        if bad:
            first = next(t for t, (x, y) in enumerate(zip(ref[bad[0]], ids[bad[0]])) if x != y)
            notes.append(f"{e} vs {runs[0][0]}: {len(bad)}/{len(ref)} sources differ (source {bad[0]} from token {first})")
    return "; ".join(notes) or f"identical ({len(runs)} engines)"


def marian_table(idx) -> list:
    engines = [SJ, SJP, "ctranslate2", "transformers"]
    lines = ["| batch | seqjit | seqjit, PASSIVE | CTranslate2 | transformers | seqjit / CT2 (target) | PASSIVE / CT2 "
             "| seqjit / transformers | ids |", "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for batch in (1, 16):
        k = {e: ("marian", e, batch) for e in engines}
        lines.append(f"| {batch} | " + " | ".join(_cell(idx, k[e]) for e in engines)
                     + f" | {_ratio(idx, k[SJ], k['ctranslate2'])} (>= {TARGETS[batch]}x) | {_ratio(idx, k[SJP], k['ctranslate2'])} "
                     f"| {_ratio(idx, k[SJ], k['transformers'])} | {_agreement(idx, 'marian', engines, batch)} |")
    return lines


def rnn_table(idx) -> list:
    lines = ["| model | batch | seqjit | seqjit, PASSIVE | PyTorch | seqjit / PyTorch | PASSIVE / PyTorch | ids |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for model, name in (("gru", "rnn_seq2seq GRU 2x512"), ("bahdanau", "attention_seq2seq Bahdanau 512")):
        for batch in (1, 16):
            s, sp, t = (model, SJ, batch), (model, SJP, batch), (model, "torch", batch)
            lines.append(f"| {name} | {batch} | {_cell(idx, s)} | {_cell(idx, sp)} | {_cell(idx, t)} | {_ratio(idx, s, t)} "
                         f"| {_ratio(idx, sp, t)} | {_agreement(idx, model, [SJ, SJP, 'torch'], batch)} |")
    return lines


def _step_ms(b) -> float:
    return (b["wall_ms"] - b["encoder_ms"]) / w.NEW_TOKENS


def profile_section(profiles) -> list:
    lines = ["## Where seqjit's time goes (seqjit.graph.profile, 2 threads)", "",
             "Per decode step (ms). `kernels`: the decoder-step graph's nodes summed; `executor`: time in "
             "`model.step` outside the nodes (feeds, checks, plan lookup, node loop); `loop`: the decoding loop "
             "outside `model.step` (processors, argmax, history). Encoder: once per `generate` (ms).", "",
             "| OMP_WAIT_POLICY | batch | tok/s (unprofiled) | ms/step | kernels | executor | loop | encoder | nodes/step |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in profiles:
        for b in p["batches"]:
            lines.append(f"| {p['omp_wait_policy'] or 'unset'} | {b['batch']} | {b['tokens_per_s']:.1f} | {_step_ms(b):.2f} | "
                         f"{b['step_kernels_ms']:.2f} | {b['step_overhead_ms']:.2f} | {b['loop_overhead_ms']:.2f} | "
                         f"{b['encoder_ms']:.1f} | {b['nodes_per_step']} |")
    for p in profiles:
        env = p["omp_wait_policy"] or "unset"
        for b in p["batches"]:
            lines += ["", f"Top ops, OMP_WAIT_POLICY {env}, batch {b['batch']} (calls and ms per step, % of kernel time): "
                      + "; ".join(f"{op} x{c} {ms:.2f} ms {pct:.0f}%" for op, c, ms, pct in b["ops"][:6])
                      + ". Top nodes: " + ", ".join(f"`{n}` {ms:.2f}" for n, ms, _ in b["nodes"][:5]) + "."]
    lines += [""]
    for p in profiles:
        env, tiny = p["omp_wait_policy"] or "unset", p["tiny_step_ms"]
        nodes = p["batches"][0]["nodes_per_step"]
        lines.append(f"- OMP_WAIT_POLICY {env}: fixed cost of a step (the same 6+6-layer graph at d_model 64, vocab 128) "
                     f"{tiny['1']:.2f} ms at batch 1, {tiny['16']:.2f} ms at batch 16 ({1e3 * tiny['1'] / nodes:.1f} us per node); "
                     "thread pools, median us: " + ", ".join(f"{k} {v:.0f}" for k, v in p["pool_switch_us"].items()) + ".")
    lines += ["", "(Thread pools: a tiny Numba prange loop and a BLAS GEMV [1536, 512], alone and alternating, and one "
              "threadpoolctl BLAS limit as the attention kernel takes per call; alternating far above the sum means "
              "the two pools wait for each other's spinning threads.)", ""]
    return lines + floor_section(profiles[0])


def floor_section(p) -> list:
    bw, gemm = p["bandwidth_GBps"], p["gemm_GFLOPs"]
    read = max(bw["read_1t"], bw["read_2t"], bw["gemv_2t"])
    floor_ms = p["step_weight_MB"] / read
    b1, b16 = p["batches"]
    compute_ms = 2 * 16 * p["step_params_M"] * 1e6 / (gemm * 1e9) * 1e3
    return ["### Distance to the floor", "",
            f"Memory bandwidth (numpy, 512 MB): copy {bw['copy_1t']:.1f} GB/s (1 thread), {bw['copy_2t']:.1f} GB/s (2 threads), "
            f"read+write counted; read (sum) {bw['read_1t']:.1f} / {bw['read_2t']:.1f} GB/s; GEMV x @ A over 512 MB {bw['gemv_2t']:.1f} GB/s "
            f"(2 threads). GEMM 1024^3: {gemm:.0f} GFLOP/s (2 threads).", "",
            f"Weights read per step: {p['step_weight_MB']:.0f} MB ({p['step_params_M']:.1f} M parameters: decoder layers without "
            f"the cross K/V projections, output projection). Floor at {read:.1f} GB/s: **{floor_ms:.2f} ms/step** "
            f"({1e3 / floor_ms:.0f} tok/s at batch 1); measured (OMP_WAIT_POLICY {p['omp_wait_policy'] or 'unset'}) "
            f"{_step_ms(b1):.2f} ms/step at batch 1 = {_step_ms(b1) / floor_ms:.2f}x the floor.",
            f"At batch 16 the step is compute-bound: 16 x {p['step_params_M']:.1f} M multiply-adds (2 flops each) at {gemm:.0f} "
            f"GFLOP/s = **{compute_ms:.1f} ms/step** ({16e3 / compute_ms:.0f} tok/s); measured {_step_ms(b16):.2f} ms/step.", ""]


def render(benches, profiles, meta, peers: str = "") -> str:
    idx = _index(benches)
    lines = ["# Decoding: seqjit vs CTranslate2 vs ONNX Runtime vs transformers (float32)", "",
             f"- Machine: {meta['cpu']}, {meta['cpus']} CPUs ({meta['cores_per_socket']} cores/socket, "
             f"{meta['threads_per_core']} threads/core), {meta['affinity']} usable; load average "
             f"{meta['load'][0][0]:.1f} at start, {meta['load'][1][0]:.1f} at end (above ~0.5 other work was running: noisy numbers).",
             f"- Date: {meta['date']}; whole run {meta['minutes']:.1f} min.",
             f"- Command: `{meta['command']}`",
             "- Versions: " + ", ".join(f"{k} {x}" for k, x in meta["versions"].items()),
             *([] if not idx else [f"- Workload: {w.SRC_LEN}-token sources ({w.SRC_LEN - 1} random ids + end token), exactly {w.NEW_TOKENS} generated "
             "tokens per source on every engine (min = max new tokens), greedy, float32, 2 threads "
             "(torch.set_num_threads(2); ctranslate2 intra_threads=2, inter_threads=1; seqjit.set_num_threads(2)); each engine "
             "in its own process. Cells: tokens/s = batch x 20 / median time of one `generate` call (median ms, timed rounds "
             "after two untimed warm-up calls). `seqjit, PASSIVE`: the same seqjit run with OMP_WAIT_POLICY=PASSIVE "
             "(Numba's OpenMP workers sleep instead of spinning after a parallel region). `ids`: the generated ids of the "
             "whole batch compared across engines."]),
             "- Marian: opus-mt-en-de sized MarianConfig (d_model 512, 6+6 layers, 8 heads, ffn 2048, vocab 58101, swish, "
             "sinusoidal positions, scale_embedding, pad 58100 = decoder start, eos 0), seeded random weights (init std 0.02), "
             "saved as HF safetensors; seqjit via `seqjit.convert.from_hf`, CTranslate2 via TransformersConverter (float32) with "
             "a stub tokenizer giving 58101 token names (the Marian loader drops `<pad>`, so CTranslate2 never generates it); "
             "transformers generate with bad_words_ids=[[pad]]; seqjit suppresses pad.",
             "", *(["## Marian against every peer (the harness: docs/benchmarks.md)", "", peers] if peers else [])]
    if idx:
        lines += ["## Marian (opus-mt-en-de size)", "", *marian_table(idx), "",
                 "## RNN seq2seq (vocabulary 32000 both sides)", "",
                 "GRU: nn.Embedding(32000, 512) + nn.GRU(512, 512, 2 layers) encoder and decoder, nn.Linear(512, 32000). Bahdanau: the "
                 "PyTorch tutorial's EncoderRNN + AttnDecoderRNN (1-layer GRU, hidden 512). PyTorch: a batched greedy loop over the "
                 "same modules (torch.inference_mode, end and pad tokens blocked); seqjit: `from_torch(state_dict)` + generate.", "",
                 *rnn_table(idx), ""]
    if profiles:
        lines += profile_section(profiles)
    return "\n".join(lines)
