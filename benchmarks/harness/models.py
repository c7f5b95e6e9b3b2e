"""The models the workloads decode: how to build and cache each (seeded weights, once), its sources,
its tokens per source and the unit of its figures.

- ``tiny``, ``gru``: ``benchmarks/decoding/small_workload.py`` (a tiny Marian-config Transformer; a
  G2P-sized GRU seq2seq, whose sources are words, figures in words/s).
- ``marian``: ``benchmarks/decoding/workload.py`` (opus-mt-en-de size, 20-token sources, 20 new tokens).
- ``rnn-gru``, ``rnn-bahdanau``: the same module's RNN models (a GRU 2 x 512 encoder-decoder; the
  PyTorch tutorial's Bahdanau attention decoder, hidden 512; vocabulary 32000), built from a torch
  seed in every process.
- ``bart``, ``m2m_100``, ``t5``: :mod:`.hf_families` (base dimensions).
- ``opennmt-rnn``: OpenNMT-py's default RNN (brnn LSTM 2 x 500, input feeding, general attention,
  vocabularies of 8000) with random weights from its own ``build_base_model``
  (``benchmarks/decoding/opennmt_rnn.py``); its workers run under the toolkit interpreter
  (``$SEQJIT_TOOLKITS_PYTHON``, default the venv of ``.ci/toolkits``), where OpenNMT-py is installed.

``prepare(model, onnx)`` runs in the parent before any worker starts: it saves the Hugging Face
directory, converts it for CTranslate2, and with ``onnx`` exports it for ONNX Runtime (returning
False when no export interpreter is available), so that no worker times a build.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from benchmarks.decoding import small_workload as sw
from benchmarks.decoding import workload as w

from . import hf_families as hf

#: search name -> (beam size, top-k: 1 is no sampling)
SEARCHES = dict(sw.MODES)


@dataclass(frozen=True)
class Model:
    sources: Callable[[int], list]   # batch -> that many sources (id lists)
    new_tokens: int                  # generated per source, by every engine
    unit: str                        # of the figures: tokens or words per second
    per_source: bool = False         # the figure counts sources (words), not tokens
    toolkits: bool = False           # every worker runs under the toolkit interpreter (toolkits_python)


#: OpenNMT-py's model: source length, new tokens, vocabulary (both sides; 4 specials first)
ONMT_SRC, ONMT_NEW, ONMT_VOCAB = 20, 30, 8000


def onmt_sources(batch: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return rng.integers(4, ONMT_VOCAB, (batch, ONMT_SRC)).tolist()


def toolkits_python() -> str:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "seqjit-ci" / "toolkits-venv" / "bin" / "python"
    return os.environ.get("SEQJIT_TOOLKITS_PYTHON", str(default))


MODELS: dict[str, Model] = {
    "tiny": Model(sw.tiny_sources, sw.TINY_NEW, "tok/s"),
    "gru": Model(sw.words, sw.GRU_NEW, "words/s", per_source=True),
    "marian": Model(w.sources, w.NEW_TOKENS, "tok/s"),
    **{f"rnn-{k}": Model(lambda b: w.sources(b, vocab=w.RNN_VOCAB, eos=w.RNN_EOS), w.NEW_TOKENS, "tok/s")
       for k in ("gru", "bahdanau")},
    **{f: Model((lambda f: lambda b: hf.sources(f, b))(f), hf.NEW_TOKENS, "tok/s") for f in hf.FAMILIES},
    "opennmt-rnn": Model(onmt_sources, ONMT_NEW, "tok/s", toolkits=True),
}


def root(model: str) -> Path | None:
    """The cache directory holding ``hf/``, ``ct2/`` (and ``onnx/``, ``seqjit_<scheme>/``); None for the RNN
    models, which every process builds from its torch seed."""
    if model == "tiny":
        return sw.prepare_tiny()
    if model == "marian":
        return w.prepare_marian()
    if model in hf.FAMILIES:
        return hf.prepare(model)
    return None


def prepare(model: str, onnx: bool = False, schemes=(), ort_python: str | None = None) -> bool:
    """Build what the workers load (``schemes``: the ``seqjit.quantize`` schemes the engines load);
    False when the ONNX export was asked for and is not available."""
    path = root(model)
    for scheme in schemes if path is not None else ():
        if not (path / f"seqjit_{scheme}" / "model.safetensors").exists():
            import seqjit

            seqjit.quantize(seqjit.convert.from_hf(path / "hf"), scheme).save(path / f"seqjit_{scheme}")
    if onnx and path is not None:
        from benchmarks.decoding import export_onnx

        return export_onnx.export(path, ort_python) is not None
    return not onnx
