"""ONNX Runtime engines over an ``optimum`` export (export_onnx.py) of any encoder-decoder that
optimum exports as ``text2text-generation-with-past`` (Marian, BART, T5, M2M100, ...).

``numpy_engine(onnx_dir, threads, rule)``: the encoder, decoder and decoder-with-past sessions driven
by a plain NumPy loop, greedy or beam search: ONNX Runtime's fairest figure (no framework around it).
Decoding follows transformers' ``generate`` on the benchmarks' workload (exactly ``rule.new_tokens``
tokens; the pad token and the end token blocked, as bad_words_ids=[[pad]] and min_new_tokens do):
greedy takes the argmax; beam search adds log-softmax scores to the beam scores, starts with one live
beam per source (the others at -1e9, as transformers), keeps the top K of the K x vocab candidates per
source and reorders the self-attention cache by the chosen beams; every hypothesis has the same
length, so the best one is the highest sum.

``generate_engine(onnx_dir, threads, rule)``: ``optimum``'s ORTModelForSeq2SeqLM.generate (needs
optimum-onnx and transformers < 4.58: it runs under the export interpreter, see export_onnx.py).

Both return ``run(sources, beam) -> list of id lists`` (the generated ids, without the start token).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Rule:
    """What the loops need to know about a model: the decoder's start token, the tokens never
    generated (pad, and the end token while min length = max length) and the tokens per source."""
    start: int
    pad: int
    eos: int
    new_tokens: int


def session_options(threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return opts


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


class OrtSeq2Seq:
    """Three sessions (encoder, first decoder step, decoder with past) and the two NumPy loops."""

    def __init__(self, onnx_dir: Path, threads: int, rule: Rule):
        import onnxruntime as ort

        opts, cpu = session_options(threads), ["CPUExecutionProvider"]
        self.rule = rule
        self.encoder = ort.InferenceSession(str(onnx_dir / "encoder_model.onnx"), opts, providers=cpu)
        self.first = ort.InferenceSession(str(onnx_dir / "decoder_model.onnx"), opts, providers=cpu)
        self.step = ort.InferenceSession(str(onnx_dir / "decoder_with_past_model.onnx"), opts, providers=cpu)
        self.first_names = [o.name for o in self.first.get_outputs()]
        self.step_names = [o.name for o in self.step.get_outputs()]
        past = [i.name for i in self.step.get_inputs() if i.name.startswith("past_key_values.")]
        self.self_names = [p for p in past if ".decoder." in p]   # grows per step, reordered by beams
        self.cross_names = [p for p in past if ".encoder." in p]  # made once by the first step

    def _blocked(self, logits: np.ndarray) -> np.ndarray:
        logits[:, self.rule.pad] = -np.inf
        logits[:, self.rule.eos] = -np.inf
        return logits

    def _start(self, srcs):
        """Encoder and the first decoder step (from the start token) on one row per source:
        (logits [B, V], self-attention cache, cross-attention cache, mask)."""
        ids = np.asarray(srcs, dtype=np.int64)
        mask = np.ones_like(ids)
        hidden = self.encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        start = np.full((len(srcs), 1), self.rule.start, dtype=np.int64)
        out = dict(zip(self.first_names, self.first.run(
            None, {"input_ids": start, "encoder_hidden_states": hidden, "encoder_attention_mask": mask})))
        self_kv = {p: out[p.replace("past_key_values", "present")] for p in self.self_names}
        cross = {p: out[p.replace("past_key_values", "present")] for p in self.cross_names}
        return self._blocked(out["logits"][:, -1].copy()), self_kv, cross, mask

    def _next(self, tokens, self_kv, cross, mask):
        feeds = {"input_ids": tokens[:, None], "encoder_attention_mask": mask, **self_kv, **cross}
        out = dict(zip(self.step_names, self.step.run(None, feeds)))
        return (self._blocked(out["logits"][:, -1].copy()),
                {p: out[p.replace("past_key_values", "present")] for p in self.self_names})

    def greedy(self, srcs) -> list:
        n = self.rule.new_tokens
        logits, self_kv, cross, mask = self._start(srcs)
        out = []
        for step in range(n):
            tokens = logits.argmax(-1).astype(np.int64)
            out.append(tokens)
            if step + 1 < n:
                logits, self_kv = self._next(tokens, self_kv, cross, mask)
        return np.stack(out, axis=1).tolist()

    def beam(self, srcs, k: int) -> list:
        n, b = self.rule.new_tokens, len(srcs)
        logits, self_kv, cross, mask = self._start(srcs)
        rep = lambda a: np.repeat(a, k, axis=0)  # noqa: E731  row r -> rows r*k .. r*k+k-1
        self_kv, cross, mask = {n_: rep(a) for n_, a in self_kv.items()}, {n_: rep(a) for n_, a in cross.items()}, rep(mask)
        logprobs = rep(_log_softmax(logits))                     # [B*K, V]
        scores = np.tile(np.r_[0.0, np.full(k - 1, -1e9)], b).astype(np.float32)
        history = np.zeros((b * k, 0), dtype=np.int64)
        vocab = logprobs.shape[1]
        for step in range(n):
            total = (scores[:, None] + logprobs).reshape(b, k * vocab)
            best = np.argpartition(-total, k, axis=1)[:, :k]
            order = np.take_along_axis(total, best, axis=1).argsort(axis=1, kind="stable")[:, ::-1]
            best = np.take_along_axis(best, order, axis=1)           # [B, K], best first
            scores = np.take_along_axis(total, best, axis=1).reshape(-1)
            rows = (np.arange(b)[:, None] * k + best // vocab).reshape(-1)
            tokens = (best % vocab).reshape(-1).astype(np.int64)
            history = np.concatenate([history[rows], tokens[:, None]], axis=1)
            if step + 1 < n:
                logits, self_kv = self._next(tokens, {n_: a[rows] for n_, a in self_kv.items()}, cross, mask)
                logprobs = _log_softmax(logits)
        best_row = scores.reshape(b, k).argmax(axis=1) + np.arange(b) * k
        return history[best_row].tolist()


def numpy_engine(onnx_dir: Path, threads: int, rule: Rule):
    model = OrtSeq2Seq(onnx_dir, threads, rule)
    return lambda srcs, beam=1: model.greedy(srcs) if beam == 1 else model.beam(srcs, beam)


def generate_engine(onnx_dir: Path, threads: int, rule: Rule):
    import torch
    from optimum.onnxruntime import ORTModelForSeq2SeqLM

    model = ORTModelForSeq2SeqLM.from_pretrained(onnx_dir, use_cache=True, use_merged=False, use_io_binding=False,
                                                 provider="CPUExecutionProvider", session_options=session_options(threads))

    def run(srcs, beam=1):
        ids = torch.tensor(srcs)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=beam,
                             min_new_tokens=rule.new_tokens, max_new_tokens=rule.new_tokens, bad_words_ids=[[rule.pad]],
                             decoder_start_token_id=rule.start, forced_bos_token_id=None, forced_eos_token_id=None)
        return out[:, 1:].tolist()
    return run
