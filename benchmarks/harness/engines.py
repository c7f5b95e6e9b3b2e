"""The engine registry: each engine by name, what it needs installed, the interpreter it runs under,
and ``build(engine, model, search, threads)``, run inside a worker process, which returns
``run(sources) -> list of id lists``.

Engines: ``seqjit`` (float32), ``seqjit-int8``, ``seqjit-float16`` and ``seqjit-bfloat16``
(``seqjit.quantize``: int8 weights, or 16-bit weights with float32 arithmetic), ``ctranslate2`` and
``ctranslate2-int8`` (its float32 conversion loaded with ``compute_type="int8"``), ``onnxruntime``
(the optimum export driven by a NumPy greedy / beam loop, ``benchmarks/decoding/ort_seq2seq.py``),
``ort-generate`` (optimum's ``ORTModelForSeq2SeqLM.generate``, under the export interpreter
``$SEQJIT_ORT_EXPORT_PYTHON``: optimum-onnx pins an older transformers), ``transformers``
(``generate``), ``torch`` (a PyTorch greedy loop over the RNN models' modules), ``numpy`` (a plain NumPy
loop over the GRU's weights) and ``opennmt`` (OpenNMT-py's own ``Translator``, greedy). Thread counts: seqjit.set_num_threads, CTranslate2 intra_threads (inter
1), ONNX Runtime intra_op_num_threads (inter 1), torch.set_num_threads, threadpoolctl for NumPy.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Engine:
    label: str
    needs: str                 # the module that must be importable (in the engine's interpreter)
    onnx: bool = False         # needs the optimum export of the model
    export_python: bool = False  # runs under the export interpreter
    toolkit: bool = False      # installed in the toolkit interpreter only (models.toolkits_python)


ENGINES: dict[str, Engine] = {
    "seqjit": Engine("seqjit", "seqjit"),
    "seqjit-int8": Engine("seqjit int8", "seqjit"),
    "seqjit-float16": Engine("seqjit float16 weights", "seqjit"),
    "seqjit-bfloat16": Engine("seqjit bfloat16 weights", "seqjit"),
    "ctranslate2": Engine("CTranslate2", "ctranslate2"),
    "ctranslate2-int8": Engine("CTranslate2 int8", "ctranslate2"),
    "onnxruntime": Engine("ONNX Runtime (NumPy loop)", "onnxruntime", onnx=True),
    "ort-generate": Engine("ONNX Runtime (optimum generate)", "optimum", onnx=True, export_python=True),
    "transformers": Engine("transformers", "transformers"),
    "torch": Engine("PyTorch loop", "torch"),
    "numpy": Engine("NumPy loop", "numpy"),
    "opennmt": Engine("OpenNMT-py translate", "onmt", toolkit=True),
}


def missing(name: str) -> str | None:
    """Why an engine cannot run in this interpreter (None: it can; the export and toolkit engines are
    checked by the export and by their interpreter's existence)."""
    e = ENGINES[name]
    if e.export_python or e.toolkit or importlib.util.find_spec(e.needs) is not None:
        return None
    return f"{e.needs} is not installed"


def set_threads(name: str, threads: int) -> None:
    if name.startswith("seqjit"):
        import seqjit  # first: it sets OMP_WAIT_POLICY=PASSIVE before torch loads the OpenMP runtime

        seqjit.set_num_threads(threads)
    if name in ("transformers", "torch", "ort-generate", "opennmt"):
        import torch

        torch.set_num_threads(threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)


def build(name: str, model: str, search: str, threads: int):
    """``run(sources) -> list of id lists`` for one engine, in this (worker) process."""
    from benchmarks.decoding import ort_seq2seq

    from . import models

    set_threads(name, threads)
    beam, topk = models.SEARCHES[search]
    if topk > 1 and model != "tiny":
        raise SystemExit(f"search {search!r}: sampling is declared for the tiny Transformer only")
    if model in ("tiny", "gru"):
        from benchmarks.decoding import small_workload as sw

        return sw.tiny_engine(name, threads, search) if model == "tiny" else sw.gru_engine(name, threads)
    if model == "opennmt-rnn":
        return _opennmt(name)
    if model.startswith("rnn-"):
        from benchmarks.decoding import workload as w

        return w.rnn_engine(name, model[4:])
    root = models.root(model)
    if name in QUANTIZED or name == "ctranslate2-int8":
        if beam != 1 or model != "marian":
            raise SystemExit("the int8 and 16-bit engines are declared for greedy Marian only")
        return _quantized(name, root, threads)
    if name in ("onnxruntime", "ort-generate"):
        rule = _rule(model)
        make = ort_seq2seq.numpy_engine if name == "onnxruntime" else ort_seq2seq.generate_engine
        run = make(root / "onnx", threads, rule)
    elif model == "marian":
        from benchmarks.decoding import workload as w

        w.THREADS = threads
        run = w.marian_engine(name)
    else:
        from . import hf_families

        run = hf_families.engine(model, name, threads)
    return lambda srcs: run(srcs, beam)


def _rule(model: str):
    """The decoding rule the ONNX Runtime loops follow: start token, pad and end blocked, new tokens."""
    from benchmarks.decoding import ort_seq2seq
    from benchmarks.decoding import workload as w

    from . import hf_families

    if model == "marian":  # Marian starts decoding from the pad token
        return ort_seq2seq.Rule(start=w.PAD, pad=w.PAD, eos=w.EOS, new_tokens=w.NEW_TOKENS)
    return hf_families.rule(model)


#: the seqjit engines of a quantized model: engine -> seqjit.quantize's scheme (saved as ``seqjit_<scheme>/``)
QUANTIZED = {"seqjit-int8": "int8", "seqjit-float16": "float16", "seqjit-bfloat16": "bfloat16"}


def _quantized(name: str, root, threads: int):
    from benchmarks.decoding import workload as w

    n = w.NEW_TOKENS
    if name in QUANTIZED:
        import seqjit

        model = seqjit.load(root / f"seqjit_{QUANTIZED[name]}")
        return lambda srcs: [r.ids[0] for r in model.generate(srcs, max_length=n, min_length=n,
                                                               max_batch_size=len(srcs))]
    import ctranslate2

    tr = ctranslate2.Translator(str(root / "ct2"), device="cpu", compute_type="int8", intra_threads=threads,
                                inter_threads=1)
    return lambda srcs: [w.token_ids(r.hypotheses[0]) for r in tr.translate_batch(
        [w.token_names(s) for s in srcs], max_batch_size=len(srcs), min_decoding_length=n, max_decoding_length=n)]


def _opennmt(name: str):
    """OpenNMT-py's default RNN, seeded: its own Translator, or seqjit.convert.from_opennmt of its weights."""
    import io
    import warnings

    from benchmarks.decoding import opennmt_rnn

    from .models import ONMT_NEW, ONMT_VOCAB

    warnings.filterwarnings("ignore")
    onmt_model, opt, vocabs = opennmt_rnn.build(ONMT_VOCAB)
    if name == "seqjit":
        from seqjit.convert import from_opennmt

        model = from_opennmt(onmt_model.state_dict(), opt)
        return lambda srcs: [r.ids[0] for r in model.generate(srcs, max_length=ONMT_NEW, min_length=ONMT_NEW,
                                                               max_batch_size=len(srcs))]
    if name != "opennmt":
        raise SystemExit(f"engine {name!r} is not declared for OpenNMT-py's RNN")
    import torch
    from onmt.translate import GNMTGlobalScorer
    from onmt.translate.translator import Translator

    scorer = GNMTGlobalScorer(alpha=0.0, beta=0.0, length_penalty="none", coverage_penalty="none")
    tr = Translator(onmt_model, vocabs, gpu=-1, beam_size=1, max_length=ONMT_NEW, min_length=ONMT_NEW,
                    global_scorer=scorer, report_score=False, out_file=io.StringIO(), n_best=1)

    def run(srcs):
        ids = torch.tensor(srcs)
        batch = {"src": ids.unsqueeze(-1), "srclen": torch.full((len(srcs),), ids.shape[1]),
                 "indices": torch.arange(len(srcs))}
        return [[int(t) for t in p[0]] for p in tr.translate_batch(batch, attn_debug=False)["predictions"]]
    return run
