"""seqjit against OpenNMT-py's own ``Translator`` (greedy) on OpenNMT-py's default RNN: a brnn LSTM
encoder and an input-feeding LSTM decoder, 2 layers x 500, general attention, vocabularies of 8000
(issue 23's speed check: >= 5x at batch 1). Random weights built by OpenNMT-py's ``build_base_model``,
imported with ``seqjit.convert.from_opennmt``; both decode exactly ``--steps`` tokens (the end token
banned until then, no token banned otherwise, as OpenNMT-py does) and must give the same ids.

    python benchmarks/decoding/opennmt_rnn.py [--threads 1] [--steps 30] [--sources 32]

Needs OpenNMT-py 3.x (``pip install OpenNMT-py torch==<the installed version>``).
"""
from __future__ import annotations

import argparse
import io
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
    opt = parser.parse_known_args(["-encoder_type", "brnn", "-decoder_type", "rnn", "-rnn_type", "LSTM", "-layers", "2",
                                   "-hidden_size", "500", "-word_vec_size", "500"])[0]
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    specials = ["<unk>", "<blank>", "<s>", "</s>"]
    vocabs = {side: pyonmttok.build_vocab_from_tokens(specials + [f"{side}{i}" for i in range(vocab)])
              for side in ("src", "tgt")}
    vocabs["data_task"] = "seq2seq"
    torch.manual_seed(0)
    return build_base_model(opt, vocabs, gpu=False).eval(), vars(opt), vocabs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--sources", type=int, default=32)
    ap.add_argument("--length", type=int, default=20)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    from onmt.translate import GNMTGlobalScorer
    from onmt.translate.translator import Translator

    import seqjit
    from seqjit.convert import from_opennmt
    from seqjit.decoding import api

    api._suppressed = lambda model: ()  # OpenNMT-py bans no token (seqjit has no option for it yet)
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

    def ours(chunk):
        return [r.ids[0] for r in model.generate(chunk, max_length=args.steps, min_length=args.steps)]

    print(f"OpenNMT-py default RNN (brnn LSTM 2x500, input feeding, general attention), {args.sources} sources of "
          f"{args.length} tokens, {args.steps} steps, {args.threads} thread(s)")
    for batch in (1, 32):
        chunks = [sources[i:i + batch] for i in range(0, len(sources), batch)]
        onmt(chunks[0]), ours(chunks[0])  # warm up
        times, results = {}, {}
        for name, fn in (("OpenNMT-py", onmt), ("seqjit", ours)):
            start = time.perf_counter()
            results[name] = [ids for chunk in chunks for ids in fn(chunk)]
            times[name] = time.perf_counter() - start
        same = results["OpenNMT-py"] == results["seqjit"]
        print(f"batch {batch:2d}: OpenNMT-py {1000 * times['OpenNMT-py'] / len(sources):7.1f} ms/source, seqjit "
              f"{1000 * times['seqjit'] / len(sources):7.1f} ms/source: x{times['OpenNMT-py'] / times['seqjit']:.1f}"
              f" (same ids: {same})")


if __name__ == "__main__":
    main()
