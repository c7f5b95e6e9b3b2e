"""Markdown for the decoding benchmark: throughput tables, engine agreement, seqjit's profile."""
from __future__ import annotations

import workload as w

TARGETS = {1: 1.2, 16: 1.5}  # seqjit / CTranslate2 wanted by the issue
MARIAN_ENGINES = ["seqjit", "ctranslate2", "transformers"]


def _index(benches) -> dict:
    """(model, engine, batch) -> (tokens/s, median s, rounds, ids)."""
    out = {}
    for b in benches:
        info, med = b["extra_info"], b["stats"]["median"]
        tps = info["batch"] * info["new_tokens"] / med
        out[(info["model"], info["engine"], info["batch"])] = (tps, med, b["stats"]["rounds"], info["ids"])
    return out


def _cell(idx, key) -> str:
    if key not in idx:
        return "-"
    tps, med, rounds, _ = idx[key]
    return f"{tps:.1f} ({1e3 * med:.0f} ms)"


def _ratio(idx, a, b) -> str:
    return f"{idx[a][0] / idx[b][0]:.2f}x" if a in idx and b in idx else "-"


def _agreement(idx, model, engines, batch) -> str:
    runs = [(e, idx[(model, e, batch)][3]) for e in engines if (model, e, batch) in idx]
    if len(runs) < 2:
        return "-"
    ref_engine, ref = runs[0]
    notes = []
    for e, ids in runs[1:]:
        bad = [i for i, (x, y) in enumerate(zip(ref, ids)) if x != y]
        if bad:
            first = next(t for t, (x, y) in enumerate(zip(ref[bad[0]], ids[bad[0]])) if x != y)
            notes.append(f"{e}: {len(bad)}/{len(ref)} sources differ (source {bad[0]} from token {first})")
    return "; ".join(notes) or f"identical ids ({len(ref)} sources x {w.NEW_TOKENS} tokens, {len(runs)} engines)"


def marian_table(idx) -> list:
    lines = ["| batch | seqjit tok/s | CTranslate2 tok/s | transformers tok/s | seqjit / CT2 (target) | seqjit / transformers | ids |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    for batch in (1, 16):
        k = {e: ("marian", e, batch) for e in MARIAN_ENGINES}
        lines.append(f"| {batch} | {_cell(idx, k['seqjit'])} | {_cell(idx, k['ctranslate2'])} | {_cell(idx, k['transformers'])} "
                     f"| {_ratio(idx, k['seqjit'], k['ctranslate2'])} (>= {TARGETS[batch]}x) | {_ratio(idx, k['seqjit'], k['transformers'])} "
                     f"| {_agreement(idx, 'marian', MARIAN_ENGINES, batch)} |")
    return lines


def rnn_table(idx) -> list:
    lines = ["| model | batch | seqjit tok/s | PyTorch tok/s | seqjit / PyTorch | ids |", "|---|---:|---:|---:|---:|---|"]
    for model, name in (("gru", "rnn_seq2seq GRU 2x512"), ("bahdanau", "attention_seq2seq Bahdanau 512")):
        for batch in (1, 16):
            s, t = (model, "seqjit", batch), (model, "torch", batch)
            lines.append(f"| {name} | {batch} | {_cell(idx, s)} | {_cell(idx, t)} | {_ratio(idx, s, t)} "
                         f"| {_agreement(idx, model, ['seqjit', 'torch'], batch)} |")
    return lines


def profile_section(p) -> list:
    bw, steps = p["bandwidth_GBps"], w.NEW_TOKENS
    read = max(bw["read_1t"], bw["read_2t"])
    floor_ms = p["step_weight_MB"] / 1e3 / read * 1e3
    lines = ["## Where seqjit's time goes (seqjit.graph.profile, 2 threads)", "",
             "Per decode step (ms). `kernels`: the decoder-step graph's nodes summed; `executor`: time in "
             "`model.step` outside the nodes (feeds, checks, plan lookup, node loop); `loop`: the decoding loop "
             "outside `model.step` (processors, argmax, history). Encoder: once per `generate`.", "",
             "| batch | tok/s (unprofiled) | ms/step | kernels | executor | loop | encoder ms | nodes/step |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for b in p["batches"]:
        step_ms = (b["wall_ms"] - b["encoder_ms"]) / steps
        lines.append(f"| {b['batch']} | {b['tokens_per_s']:.1f} | {step_ms:.2f} | {b['step_kernels_ms']:.2f} | "
                     f"{b['step_overhead_ms']:.2f} | {b['loop_overhead_ms']:.2f} | {b['encoder_ms']:.1f} | {b['nodes_per_step']} |")
    for b in p["batches"]:
        lines += ["", f"Top ops, batch {b['batch']} (ms per step, calls per step, % of kernel time):", "",
                  "| op (backend) | calls | ms/step | % |", "|---|---:|---:|---:|"]
        lines += [f"| {op} | {c} | {ms:.3f} | {pct:.1f} |" for op, c, ms, pct in b["ops"][:8]]
        lines += ["", f"Top nodes, batch {b['batch']}: " + ", ".join(f"`{n}` {ms:.2f} ms" for n, ms, _ in b["nodes"][:6])]
    tiny = p["tiny_step_ms"]
    b1 = p["batches"][0]
    b1_step = (b1["wall_ms"] - b1["encoder_ms"]) / steps
    gemm = p["gemm_GFLOPs"]
    b16 = p["batches"][1]
    compute_ms = 2 * 16 * p["step_params_M"] * 1e6 / (gemm * 1e9) * 1e3
    lines += ["", "Fixed cost of a step (the same 6+6-layer graph at d_model 64, vocab 128: kernels do next to nothing): "
              f"{tiny['1']:.2f} ms at batch 1, {tiny['16']:.2f} ms at batch 16, i.e. {1e3 * tiny['1'] / b1['nodes_per_step']:.1f} us "
              f"per node ({1 / tiny['1'] * 1e3:.0f} steps/s at most).", "",
              "Thread pools (median us): " + ", ".join(f"{k} {v:.0f}" for k, v in p["pool_switch_us"].items())
              + " (a Numba prange loop and a BLAS GEMV [1536, 512], alone and alternating; alternating far above the sum "
              "means the two pools wait on each other's threads).", "",
              "### Distance to the floor", "",
              f"Memory bandwidth (numpy, 512 MB): copy {bw['copy_1t']:.1f} GB/s (1 thread), {bw['copy_2t']:.1f} GB/s (2 threads), "
              f"read+write counted; read (sum) {bw['read_1t']:.1f} / {bw['read_2t']:.1f} GB/s. GEMM 1024^3: {gemm:.0f} GFLOP/s (2 threads).", "",
              f"Weights read per step: {p['step_weight_MB']:.0f} MB ({p['step_params_M']:.1f} M parameters: decoder layers "
              f"without the cross K/V projections, output projection). Floor at {read:.1f} GB/s: **{floor_ms:.2f} ms/step** "
              f"({1e3 / floor_ms:.0f} tok/s at batch 1); measured {b1_step:.2f} ms/step at batch 1 = {b1_step / floor_ms:.2f}x the floor.",
              f"At batch 16 the step is compute-bound: 16 x {p['step_params_M']:.1f} M multiply-adds (2 flops each) at {gemm:.0f} GFLOP/s = "
              f"**{compute_ms:.1f} ms/step** ({16e3 / compute_ms:.0f} tok/s); measured "
              f"{(b16['wall_ms'] - b16['encoder_ms']) / steps:.2f} ms/step."]
    return lines


def render(benches, profile, meta) -> str:
    idx = _index(benches)
    v = meta["versions"]
    lines = ["# Decoding: seqjit vs CTranslate2 vs transformers (greedy, float32, 2 threads)", "",
             f"- Machine: {meta['cpu']}, {meta['cpus']} CPUs ({meta['cores_per_socket']} cores/socket, "
             f"{meta['threads_per_core']} threads/core), {meta['affinity']} usable; load average "
             f"{meta['load'][0][0]:.1f} at start, {meta['load'][1][0]:.1f} at end (a loaded machine makes these numbers noise).",
             f"- Date: {meta['date']}; whole run {meta['minutes']:.1f} min.",
             f"- Command: `{meta['command']}`",
             "- Versions: " + ", ".join(f"{k} {x}" for k, x in v.items()),
             f"- Workload: {w.SRC_LEN}-token sources ({w.SRC_LEN - 1} random ids + end token), exactly {w.NEW_TOKENS} generated "
             "tokens per source on every engine (min = max new tokens), greedy, float32, 2 threads "
             "(torch.set_num_threads(2); ctranslate2 intra_threads=2, inter_threads=1; seqjit.set_num_threads(2)); each engine "
             "in its own process; tokens/s = batch x 20 / median time of one `generate` call (pedantic rounds after an untimed "
             "warm-up round), median ms in parentheses.",
             "- Marian: opus-mt-en-de sized MarianConfig (d_model 512, 6+6 layers, 8 heads, ffn 2048, vocab 58101, swish, "
             "sinusoidal positions, scale_embedding, pad 58100 = decoder start, eos 0), seeded random weights (init std 0.02), "
             "saved as HF safetensors; seqjit via `seqjit.convert.from_hf`, CTranslate2 via TransformersConverter (float32) with "
             "a stub tokenizer giving 58101 token names (the Marian loader drops `<pad>`, so CTranslate2 never generates it); "
             "transformers generate with bad_words_ids=[[pad]]; seqjit suppresses pad.",
             "", "## Marian (opus-mt-en-de size)", "", *marian_table(idx), "",
             "## RNN seq2seq (vocabulary 32000 both sides)", "",
             "GRU: nn.Embedding(32000, 512) + nn.GRU(512, 512, 2 layers) encoder and decoder, nn.Linear(512, 32000). Bahdanau: the "
             "PyTorch tutorial's EncoderRNN + AttnDecoderRNN (1-layer GRU, hidden 512). PyTorch: a batched greedy loop over the "
             "same modules (torch.inference_mode, end and pad tokens blocked); seqjit: `from_torch(state_dict)` + generate.", "",
             *rnn_table(idx), ""]
    if profile:
        lines += profile_section(profile) + [""]
    return "\n".join(lines)
