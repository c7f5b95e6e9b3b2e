"""ONNX Runtime engines for the decoding benchmark's Marian, on the ``optimum`` export (export_onnx.py):
the loops of ort_seq2seq.py with Marian's rule (decoding starts from the pad token; pad and end blocked,
exactly NEW_TOKENS tokens per source).

``numpy_engine(onnx_dir, threads)``: the sessions driven by the NumPy greedy / beam loop;
``generate_engine(onnx_dir, threads)``: optimum's ORTModelForSeq2SeqLM.generate (export interpreter).
Both return ``run(sources, beam) -> list of id lists``.
"""
from __future__ import annotations

from pathlib import Path

import ort_seq2seq
import workload as w

RULE = ort_seq2seq.Rule(start=w.PAD, pad=w.PAD, eos=w.EOS, new_tokens=w.NEW_TOKENS)
session_options = ort_seq2seq.session_options


def numpy_engine(onnx_dir: Path, threads: int):
    return ort_seq2seq.numpy_engine(onnx_dir, threads, RULE)


def generate_engine(onnx_dir: Path, threads: int):
    return ort_seq2seq.generate_engine(onnx_dir, threads, RULE)
