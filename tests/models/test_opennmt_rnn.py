"""OpenNMT-py RNN models built by OpenNMT-py's own ``build_base_model`` from its option parser
(random weights), imported with :func:`seqjit.convert.from_opennmt` from the in-memory state dict,
and checked against OpenNMT-py's own code on 200 sources: teacher-forced logits and attention (its
decoder stepped as its ``Translator`` steps it) and the ids of its ``Translator`` (``GreedySearch``
at beam 1, ``BeamSearch`` at beam 4, no length penalty). Variants: rnn/brnn, LSTM/GRU, 1-2 layers,
dot/general/mlp attention, input feeding on and off, ``-bridge``, ``-context_gate``. Marked
``toolkit``.

OpenNMT-py's searches ban no token (its pad ``<blank>`` and ``<s>`` can be generated: they are, with
these weights); the converted config records that (``suppress_pad_token`` false), and seqjit's
searches read it.
"""
import io

import numpy as np
import pytest

import torch

from seqjit.convert import from_opennmt
from seqjit.errors import ConfigError

#: OpenNMT-py's own code: not in the test extra (it pins an older CTranslate2, a benchmark peer), so
#: these tests are deselected from the default run; ``.ci/toolkits`` runs them in a venv of their own
pytestmark = pytest.mark.toolkit


def _onmt():
    """OpenNMT-py's option parser, builder and translator, imported when a test runs (the module is
    collected without OpenNMT-py)."""
    from types import SimpleNamespace

    import onmt.opts as opts
    import pyonmttok
    from onmt.model_builder import build_base_model
    from onmt.translate import GNMTGlobalScorer
    from onmt.translate.translator import Translator
    from onmt.utils.parse import ArgumentParser

    return SimpleNamespace(opts=opts, pyonmttok=pyonmttok, build_base_model=build_base_model,
                           GNMTGlobalScorer=GNMTGlobalScorer, Translator=Translator, ArgumentParser=ArgumentParser)

UNK, PAD, BOS, EOS = 0, 1, 2, 3
TOL = 1e-4
MAX_LEN = 7

CASES = {
    "brnn-lstm-2-general-feed": ["-encoder_type", "brnn", "-rnn_type", "LSTM", "-layers", "2",
                                 "-global_attention", "general"],
    "brnn-gru-1-mlp-feed": ["-encoder_type", "brnn", "-rnn_type", "GRU", "-global_attention", "mlp"],
    "rnn-lstm-1-dot-nofeed": ["-encoder_type", "rnn", "-rnn_type", "LSTM", "-global_attention", "dot",
                              "-input_feed", "0"],
    "brnn-gru-2-mlp-nofeed": ["-encoder_type", "brnn", "-rnn_type", "GRU", "-layers", "2", "-global_attention", "mlp",
                              "-input_feed", "0"],
    # -bridge (RNNEncoder._bridge: relu(Linear(L*H, L*H)) over the flattened final states)
    "brnn-lstm-2-general-feed-bridge": ["-encoder_type", "brnn", "-rnn_type", "LSTM", "-layers", "2",
                                        "-global_attention", "general", "-bridge"],
    "brnn-gru-1-mlp-nofeed-bridge": ["-encoder_type", "brnn", "-rnn_type", "GRU", "-global_attention", "mlp",
                                     "-input_feed", "0", "-bridge"],
    "rnn-lstm-2-dot-feed-bridge": ["-encoder_type", "rnn", "-rnn_type", "LSTM", "-layers", "2",
                                   "-global_attention", "dot", "-bridge"],
    # context gates (Tu et al. 2017): fed to the next step, with input feeding; after the RNN without it
    "brnn-lstm-2-general-feed-gate-both": ["-encoder_type", "brnn", "-rnn_type", "LSTM", "-layers", "2",
                                           "-global_attention", "general", "-context_gate", "both"],
    "brnn-gru-1-mlp-feed-gate-source": ["-encoder_type", "brnn", "-rnn_type", "GRU", "-global_attention", "mlp",
                                        "-context_gate", "source"],
    "rnn-lstm-1-dot-nofeed-gate-target": ["-encoder_type", "rnn", "-rnn_type", "LSTM", "-global_attention", "dot",
                                          "-input_feed", "0", "-context_gate", "target"],
}
#: weight seeds whose models tell the 200 sources apart (seed 0 of these maps most sources to a handful
#: of outputs, which would check little)
#: (picked again for OpenNMT-py 3.5, whose builder draws the weights in another order)
SEEDS = {"brnn-lstm-2-general-feed-gate-both": 7, "rnn-lstm-1-dot-nofeed-gate-target": 6,
         "brnn-lstm-2-general-feed-bridge": 3, "rnn-lstm-2-dot-feed-bridge": 2, "brnn-lstm-2-general-feed": 3,
         "rnn-lstm-1-dot-nofeed": 1}
#: the greedy and beam comparison's sources (the teacher-forced one reads the first few)
N_SOURCES = 200


def vocabularies():
    specials = ["<unk>", "<blank>", "<s>", "</s>"]
    return {"src": _onmt().pyonmttok.build_vocab_from_tokens(specials + [f"s{i}" for i in range(9)]),
            "tgt": _onmt().pyonmttok.build_vocab_from_tokens(specials + [f"t{i}" for i in range(11)]), "data_task": "seq2seq",
            "decoder_start_token": "<s>"}  # 3.5's Translator starts the target with it


def build(name, seed=None, scale=10.0):
    parser = _onmt().ArgumentParser()
    _onmt().opts.model_opts(parser)
    _onmt().opts._add_train_general_opts(parser)
    _onmt().opts.distributed_opts(parser)  # 3.5: the encoder reads parallel_mode
    opt = parser.parse_known_args(["-decoder_type", "rnn", "-hidden_size", "8", "-word_vec_size", "5", *CASES[name]])[0]
    _onmt().ArgumentParser.update_model_opts(opt)
    _onmt().ArgumentParser.validate_model_opts(opt)
    torch.manual_seed(SEEDS.get(name, 0) if seed is None else seed)
    onmt_model = build_base(opt, vocabularies())
    with torch.no_grad():  # uniform(-0.1, 0.1) -> (-1, 1): outputs far apart
        for p in onmt_model.parameters():
            p.mul_(scale)
    sd = onmt_model.state_dict()  # the generator is a submodule here: its weights are under "generator."
    return onmt_model, vars(opt), from_opennmt(sd, vars(opt))


def build_base(opt, vocabs):
    """OpenNMT-py 3.5's ``build_base_model(opt, vocabs)`` (its ``gpu`` argument is gone), its weights
    drawn as ``build_model`` draws them (uniform(-param_init, param_init)): the builder itself leaves
    some of them uninitialised (``skip_init``)."""
    model = _onmt().build_base_model(opt, vocabs)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-opt.param_init, opt.param_init)
    return model.eval()


def sources(seed=1, n=5):
    rng = np.random.default_rng(seed)
    lengths = [3, 7, 1, 5, 5] + list(rng.integers(1, 10, n - 5))
    ids = np.full((len(lengths), max(lengths)), PAD, np.int64)
    for b, n in enumerate(lengths):
        ids[b, :n] = rng.integers(4, 13, n)
    return ids, np.array(lengths)


def translate(onmt_model, ids, lengths, beam_size):
    """OpenNMT-py's Translator on one batch: the best ids of each source, end token dropped."""
    scorer = _onmt().GNMTGlobalScorer(alpha=0.0, beta=0.0, length_penalty="none", coverage_penalty="none")
    translator = _onmt().Translator(onmt_model, vocabularies(), gpu=-1, beam_size=beam_size, max_length=MAX_LEN, min_length=0,
                            global_scorer=scorer, report_score=False, out_file=io.StringIO(), n_best=1)
    batch = {"src": torch.tensor(ids).unsqueeze(-1), "srclen": torch.tensor(lengths), "indices": torch.arange(len(ids))}
    found = translator.translate_batch(batch, attn_debug=False)["predictions"]
    return [[int(t) for t in best[0] if int(t) != EOS] for best in found]


def teacher_forced(onmt_model, opt, ids, tgt, lengths):
    """OpenNMT-py's logits and attention [B, T-1, S] for tgt[:, :-1], its decoder stepped one token at
    a time as its Translator steps it (its whole-sequence ``StdRNNDecoder.forward`` with a context
    gate fails on the batch-first layout: ``rnn_out.view`` of a non-contiguous tensor)."""
    src, src_len = torch.tensor(ids).unsqueeze(-1), torch.tensor(lengths)
    logits, att = [], []
    with torch.no_grad():
        enc_out, enc_final, src_len = onmt_model.encoder(src, src_len)
        onmt_model.decoder.init_state(src, enc_out, enc_final)
        for t in range(tgt.shape[1] - 1):
            dec_out, attns = onmt_model.decoder(torch.tensor(tgt[:, t:t + 1]).unsqueeze(-1), enc_out,
                                                src_len=src_len, step=t)
            logits.append(onmt_model.generator(dec_out).numpy())
            a = attns["std"]
            att.append((a.transpose(0, 1) if opt["input_feed"] else a).numpy())  # [B, 1, S]
    return np.concatenate(logits, axis=1), np.concatenate(att, axis=1)


def recorded_bans(model) -> tuple:
    """The bans the converted config records (``suppress_tokens``, ``suppress_pad_token``), which seqjit's
    decoding reads (``resolve_rules``): with them, seqjit's searches must give the toolkit's own."""
    c = model.config
    return tuple(c.suppress_tokens or ()) + ((c.pad_id,) if c.suppress_pad_token else ())


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.filterwarnings("ignore")
def test_opennmt_model_matches(name):
    onmt_model, opt, model = build(name)
    assert recorded_bans(model) == ()  # OpenNMT-py's searches ban nothing
    ids, lengths = sources(n=N_SOURCES)
    rng = np.random.default_rng(2)
    tgt = np.concatenate([np.full((len(lengths), 1), BOS), rng.integers(4, 15, (len(lengths), 5))], axis=1)
    logits, att = teacher_forced(onmt_model, opt, ids, tgt, lengths)
    tgt_in = tgt[:, :-1]
    assert np.abs(model.logits(ids, tgt_in, lengths) - logits).max() <= TOL
    state = model.start(ids, lengths, max_length=tgt_in.shape[1])
    for t in range(tgt_in.shape[1]):
        _, weights = model.step(state, tgt_in[:, t], with_attention=True)
        assert np.abs(weights - att[:, t]).max() <= TOL
    state.close()
    srcs = [list(ids[b, :n]) for b, n in enumerate(lengths)]
    for beam_size in (1, 4):
        want = translate(onmt_model, ids, lengths, beam_size)
        assert len({tuple(w) for w in want}) >= 10  # the sources are told apart
        found = model.generate(srcs, max_length=MAX_LEN, beam_size=beam_size, length_penalty=0.0)
        assert [r.ids[0] for r in found] == want, beam_size


@pytest.mark.parametrize("key,value,match", [
    ("coverage_attn", True, r"option coverage_attn=True"), ("context_gate", "input", r"option context_gate='input'"),
    ("global_attention_function", "sparsemax", r"sparsemax"),
    ("encoder_type", "transformer", r"encoder_type='transformer'"), ("dec_layers", 1, r"dec_layers/dec_hid_size"),
])
def test_unsupported_opennmt_options_are_named(key, value, match):
    onmt_model, opt, _ = build("brnn-gru-1-mlp-feed")
    with pytest.raises(ConfigError, match=match):
        from_opennmt(onmt_model.state_dict(), {**opt, key: value})


def test_copy_attention_model_is_refused_by_name():
    from seqjit.errors import ModelFormatError

    onmt_model, opt, _ = build("brnn-gru-1-mlp-feed")
    with pytest.raises(ModelFormatError, match=r"option copy_attn=True: the model has OpenNMT-py's copy generator"):
        from_opennmt(onmt_model.state_dict(), {**opt, "copy_attn": True})


def test_checkpoint_read_without_running_code(tmp_path):
    """The documented path: a checkpoint laid out as OpenNMT-py's ModelSaver writes it (model without
    the generator, generator, vocab lists, the options Namespace) read with ``weights_only=True``,
    admitting ``argparse.Namespace`` alone."""
    import argparse

    onmt_model, opt, model = build("brnn-lstm-2-general-feed")
    sd = onmt_model.state_dict()
    torch.save({"model": {k: v for k, v in sd.items() if "generator" not in k},
                "generator": onmt_model.generator.state_dict(), "vocab": {"src": ["<unk>"], "tgt": ["<unk>"]},
                "opt": argparse.Namespace(**opt)}, tmp_path / "model.pt")
    with torch.serialization.safe_globals([argparse.Namespace]):
        ckpt = torch.load(tmp_path / "model.pt", map_location="cpu", weights_only=True)
    loaded = from_opennmt({**ckpt["model"], **{"generator." + k: v for k, v in ckpt["generator"].items()}},
                          vars(ckpt["opt"]))
    ids, lengths = sources()
    tgt = np.full((len(lengths), 3), 5)
    np.testing.assert_array_equal(loaded.logits(ids, tgt, lengths), model.logits(ids, tgt, lengths))


@pytest.mark.parametrize("name", [n for n in CASES if "gate" in n])
@pytest.mark.filterwarnings("ignore")
def test_context_gate_lowers_to_native_replay(name):
    """The gate's nodes (concat, linears, mul, add, tanh) run in the native replay, none in Python."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("attention_variants", Path(__file__).with_name("test_attention_variants.py"))
    variants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(variants)
    _, _, model = build(name)
    ids, lengths = sources()
    variants.assert_native(model, ids, lengths)
