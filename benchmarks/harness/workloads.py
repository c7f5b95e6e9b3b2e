"""The workloads, declared as data: which model, which search, which batch sizes, which engines.

A workload's first engine is the one measured; the table gives its ratio to every other engine (its
peers) and, where ``reference`` is set, how many sources each engine decoded to the reference's ids.
Every engine generates exactly the model's number of new tokens per source (minimum = maximum
length, the end and pad tokens blocked), so all do the same work. Models: :mod:`.models`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    name: str
    model: str                 # a model of models.MODELS
    engines: tuple[str, ...]   # engines.ENGINES names; the first is the subject of the ratios
    batches: tuple[int, ...]
    search: str = "greedy"     # greedy, beam4 or topk10 (models.SEARCHES)
    reference: str | None = None
    about: str = ""


TRANSFORMER_PEERS = ("seqjit", "ctranslate2", "onnxruntime", "ort-generate", "transformers")
_W = [
    Workload("tiny-greedy", "tiny", ("seqjit", "ctranslate2", "transformers"), (1, 64), "greedy", "transformers",
             "tiny Transformer (Marian config, d_model 128, 2 + 2 layers, vocabulary 100), 10 new tokens"),
    Workload("tiny-beam4", "tiny", ("seqjit", "ctranslate2", "transformers"), (1, 64), "beam4", "transformers",
             "tiny Transformer, beam search of width 4"),
    Workload("tiny-topk10", "tiny", ("seqjit", "ctranslate2", "transformers"), (1, 64), "topk10", None,
             "tiny Transformer, top-k 10 sampling (seeded: the engines' ids differ by design)"),
    Workload("gru", "gru", ("seqjit", "numpy", "torch"), (1, 1024), "greedy", "torch",
             "G2P-sized GRU seq2seq (embedding and hidden 256, vocabularies 29 and 74), 8 new tokens; words/s"),
    Workload("rnn-gru", "rnn-gru", ("seqjit", "torch"), (1, 16), "greedy", "torch",
             "GRU 2 x 512 encoder-decoder, vocabulary 32000, 20-token sources, 20 new tokens"),
    Workload("rnn-bahdanau", "rnn-bahdanau", ("seqjit", "torch"), (1, 16), "greedy", "torch",
             "the PyTorch tutorial's Bahdanau attention decoder (GRU, hidden 512), vocabulary 32000, 20 new tokens"),
    Workload("opennmt-rnn", "opennmt-rnn", ("seqjit", "opennmt"), (1, 32), "greedy", "opennmt",
             "OpenNMT-py's default RNN (brnn LSTM 2 x 500, input feeding, general attention, vocabularies 8000), "
             "20-token sources, 30 new tokens; the toolkit interpreter"),
    Workload("marian-greedy", "marian", TRANSFORMER_PEERS, (1, 16), "greedy", "transformers",
             "Marian at opus-mt-en-de size (seeded random weights), 20-token sources, 20 new tokens"),
    Workload("marian-beam4", "marian", TRANSFORMER_PEERS, (1, 16), "beam4", "transformers",
             "Marian at opus-mt-en-de size, beam search of width 4"),
    Workload("marian-int8", "marian", ("seqjit-int8", "ctranslate2-int8", "seqjit", "ctranslate2"), (1, 16),
             "greedy", None, "Marian at opus-mt-en-de size, int8 weights (seqjit.quantize; CTranslate2 compute_type int8)"),
    Workload("marian-half", "marian", ("seqjit-float16", "seqjit-bfloat16", "seqjit", "ctranslate2"), (1, 16),
             "greedy", None, "Marian at opus-mt-en-de size, 16-bit weights (seqjit.quantize float16 / bfloat16, float32 "
                             "arithmetic) against float32"),
]
for family, shape in (("bart", "bart-base"), ("m2m_100", "m2m100_418M"), ("t5", "t5-base")):
    for search in ("greedy", "beam4"):
        _W.append(Workload(f"{family}-{search}", family, TRANSFORMER_PEERS, (1, 16), search, "transformers",
                           f"{shape} dimensions (transformers' default init, seeded), 20-token sources, 20 new tokens"
                           + (", beam search of width 4" if search == "beam4" else "")))

WORKLOADS: dict[str, Workload] = {w.name: w for w in _W}

#: names that stand for several workloads (and the engines they keep, None: all)
GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    # seqjit against CTranslate2 and the NumPy loop across the model sizes (RESULTS.md's host matrix)
    "host-matrix": (("tiny-greedy", "tiny-beam4", "tiny-topk10", "marian-greedy", "marian-beam4", "marian-int8", "gru"),
                    ("seqjit", "seqjit-int8", "ctranslate2", "ctranslate2-int8", "numpy")),
    "small": (("tiny-greedy", "tiny-beam4", "tiny-topk10", "gru"), None),
    "rnn": (("rnn-gru", "rnn-bahdanau"), None),
    "marian": (("marian-greedy", "marian-beam4", "marian-int8", "marian-half"), None),
    "hf-families": (tuple(w.name for w in _W if w.model in ("bart", "m2m_100", "t5")), None),
}


def select(spec: str) -> list[tuple[Workload, tuple[str, ...] | None]]:
    """``tiny-greedy,gru`` or a group or ``all`` -> [(workload, engines kept or None)]."""
    out = []
    for name in spec.split(","):
        if name == "all":
            out += [(w, None) for w in WORKLOADS.values()]
        elif name in GROUPS:
            names, keep = GROUPS[name]
            out += [(WORKLOADS[n], keep) for n in names]
        elif name in WORKLOADS:
            out.append((WORKLOADS[name], None))
        else:
            raise SystemExit(f"--workload: unknown workload {name!r}; known: {', '.join([*WORKLOADS, *GROUPS, 'all'])}")
    return out
