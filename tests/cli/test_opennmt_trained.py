"""Checkpoints written by OpenNMT-py's own training (``onmt_build_vocab`` then ``onmt_train``, in
process: ``onmt.bin.build_vocab`` / ``onmt.bin.train``, its ``ModelSaver`` writing ``*_step_N.pt``) on a
tiny generated corpus, with its default options for an RNN and for a Transformer (3.5:
``self_attn_type`` scaled-dot-flash, ``add_ffnbias`` false, its options holding a ``set``), converted by
``seqjit convert CHECKPOINT OUT --from opennmt`` and decoded: the ids must be those of OpenNMT-py's
own ``Translator`` (the model loaded by its ``load_test_model``; ``GreedySearch`` at beam 1,
``BeamSearch`` at beam 4, no length penalty) on 200 sources of 1-15 tokens. Four SGD steps from a wide
initialisation (``-param_init 1 -learning_rate 0.1``: the default 0.1 and 1.0 give models that map
every source to one output, which would check little). Marked ``toolkit``.
"""
import argparse
import io
import json

import numpy as np
import pytest

import seqjit

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.toolkit

STEPS = 4
N_SOURCES = 200
MAX_LEN = 9
EOS = 3
#: the model options past OpenNMT-py's defaults: sizes, and the Transformer's encoder/decoder types
KINDS = {"rnn": ["-hidden_size", "16", "-word_vec_size", "8"],
         "transformer": ["-encoder_type", "transformer", "-decoder_type", "transformer", "-position_encoding",
                         "-hidden_size", "16", "-word_vec_size", "16", "-heads", "2", "-transformer_ff", "32",
                         "-enc_layers", "2", "-dec_layers", "1"]}


def _corpus(directory, n=300, seed=0):
    rng = np.random.default_rng(seed)
    for side, prefix in (("src", "s"), ("tgt", "t")):
        rows = [" ".join(f"{prefix}{w}" for w in rng.integers(0, 20, rng.integers(1, 12))) for _ in range(n)]
        (directory / f"{side}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")


def _parse(module, argv):
    return module._get_parser().parse_known_args([str(a) for a in argv])[0]


@pytest.fixture(scope="session")
def onmt_checkpoints(tmp_path_factory):
    """{kind: the ``*_step_4.pt`` OpenNMT-py's training wrote} (built once a session)."""
    from onmt.bin import build_vocab, train

    d = tmp_path_factory.mktemp("onmt_train")
    _corpus(d)
    config = {"save_data": str(d), "src_vocab": str(d / "vocab.src"), "tgt_vocab": str(d / "vocab.tgt"),
              "overwrite": True, "data": {"corpus_1": {"path_src": str(d / "src.txt"), "path_tgt": str(d / "tgt.txt")}}}
    (d / "config.yaml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    build_vocab.build_vocab_main(_parse(build_vocab, ["-config", d / "config.yaml", "-n_sample", "-1"]))
    out = {}
    for kind, options in KINDS.items():
        train.train(_parse(train, ["-config", d / "config.yaml", "-save_model", d / kind, "-train_steps", STEPS,
                                   "-save_checkpoint_steps", STEPS, "-valid_steps", 1000, "-batch_size", 16,
                                   "-batch_type", "sents", "-num_workers", 0, "-bucket_size", 64, "-seed", 3,
                                   "-param_init", 1.0, "-learning_rate", 0.1, *options]))
        out[kind] = d / f"{kind}_step_{STEPS}.pt"
        assert out[kind].is_file()
    return out


def onmt_translate(checkpoint, ids, lengths, beam_size):
    """OpenNMT-py's own model loading and Translator on one batch: the best ids of each source, end
    token dropped."""
    from onmt.model_builder import load_test_model
    from onmt.opts import translate_opts
    from onmt.translate import GNMTGlobalScorer
    from onmt.translate.translator import Translator
    from onmt.utils.parse import ArgumentParser

    parser = ArgumentParser()
    translate_opts(parser)
    opt = parser.parse_known_args(["-model", str(checkpoint), "-src", "-", "-gpu", "-1"])[0]
    # its torch.load leaves weights_only to torch, True since 2.6: the options' classes admitted (our own file)
    with torch.serialization.safe_globals([argparse.Namespace, set]):
        vocabs, model, _ = load_test_model(opt)
    scorer = GNMTGlobalScorer(alpha=0.0, beta=0.0, length_penalty="none", coverage_penalty="none")
    translator = Translator(model.eval(), vocabs, gpu=-1, beam_size=beam_size, max_length=MAX_LEN, min_length=0,
                            global_scorer=scorer, report_score=False, out_file=io.StringIO(), n_best=1)
    batch = {"src": torch.tensor(ids).unsqueeze(-1), "srclen": torch.tensor(lengths), "indices": torch.arange(len(ids))}
    with torch.no_grad():
        found = translator.translate_batch(batch, attn_debug=False)["predictions"]
    return [[int(t) for t in best[0] if int(t) != EOS] for best in found], len(vocabs["src"])


def sources(vocab_size, n=N_SOURCES, seed=1):
    """n sources of 1-15 word ids (no specials), padded with <blank> (1), longest first as OpenNMT-py
    batches them (its Translator reads ``srclen``; the order is the batch's own)."""
    rng = np.random.default_rng(seed)
    lengths = np.array([15, 1, 8] + list(rng.integers(1, 16, n - 3)))
    ids = np.full((n, lengths.max()), 1, np.int64)
    for b, k in enumerate(lengths):
        ids[b, :k] = rng.integers(4, vocab_size, k)
    return ids, lengths


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.filterwarnings("ignore")
def test_onmt_train_checkpoint_decodes_as_opennmt(cli, onmt_checkpoints, tmp_path, kind):
    checkpoint = onmt_checkpoints[kind]
    code, out, err = cli("convert", checkpoint, tmp_path / "sj", "--from", "opennmt")
    assert code == 0, err
    model = seqjit.load(tmp_path / "sj")
    _, vocab_size = onmt_translate(checkpoint, np.array([[4]]), np.array([1]), 1)
    ids, lengths = sources(vocab_size)
    srcs = [list(ids[b, :k]) for b, k in enumerate(lengths)]
    for beam_size in (1, 4):
        want, _ = onmt_translate(checkpoint, ids, lengths, beam_size)
        assert len({tuple(w) for w in want}) >= 20  # the sources are told apart
        found = model.generate(srcs, max_length=MAX_LEN, beam_size=beam_size, length_penalty=0.0)
        assert [r.ids[0] for r in found] == want, beam_size
