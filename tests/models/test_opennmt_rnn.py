"""OpenNMT-py RNN models built by OpenNMT-py's own ``build_base_model`` from its option parser
(random weights), imported with :func:`seqjit.convert.from_opennmt` from the in-memory state dict,
and checked against OpenNMT-py's own modules: teacher-forced logits (``NMTModel.forward`` +
``generator``) and attention, and greedy ids from a loop that steps OpenNMT-py's decoder (its
``init_state`` and ``decoder(..., step=t)``, which carry the input feed), banning the pad token as
seqjit does. OpenNMT-py's ``Translator`` (its beam search) is not run here. Skipped when OpenNMT-py
is not installed.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onmt")
pyonmttok = pytest.importorskip("pyonmttok")
import onmt.opts as opts  # noqa: E402
from onmt.model_builder import build_base_model  # noqa: E402
from onmt.utils.parse import ArgumentParser  # noqa: E402

from seqjit.convert import from_opennmt  # noqa: E402
from seqjit.errors import ConfigError  # noqa: E402

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
}


def build(name, seed=0):
    parser = ArgumentParser()
    opts.model_opts(parser)
    opts._add_train_general_opts(parser)
    opt = parser.parse_known_args(["-decoder_type", "rnn", "-hidden_size", "8", "-word_vec_size", "5", *CASES[name]])[0]
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    specials = ["<unk>", "<blank>", "<s>", "</s>"]
    vocabs = {"src": pyonmttok.build_vocab_from_tokens(specials + [f"s{i}" for i in range(9)]),
              "tgt": pyonmttok.build_vocab_from_tokens(specials + [f"t{i}" for i in range(11)]), "data_task": "seq2seq"}
    torch.manual_seed(seed)
    onmt_model = build_base_model(opt, vocabs, gpu=False).eval()
    with torch.no_grad():  # uniform(-0.1, 0.1) -> (-1, 1): outputs far apart
        for p in onmt_model.parameters():
            p.mul_(10.0)
    sd = onmt_model.state_dict()  # the generator is a submodule here: its weights are under "generator."
    return onmt_model, vars(opt), from_opennmt(sd, vars(opt))


def sources(seed=1):
    rng = np.random.default_rng(seed)
    lengths = [3, 7, 1, 5, 5]
    ids = np.full((len(lengths), max(lengths)), PAD, np.int64)
    for b, n in enumerate(lengths):
        ids[b, :n] = rng.integers(4, 13, n)
    return ids, np.array(lengths)


@torch.no_grad()
def onmt_greedy(model, ids, lengths):
    src, src_len = torch.tensor(ids).unsqueeze(-1), torch.tensor(lengths)
    enc_out, enc_final, src_len = model.encoder(src, src_len)
    model.decoder.init_state(src, enc_out, enc_final)
    token, out = torch.full((len(lengths), 1, 1), BOS), []
    for step in range(MAX_LEN):
        dec_out, _ = model.decoder(token, enc_out, src_len=src_len, step=step)
        logits = model.generator(dec_out.squeeze(1))
        logits[:, PAD] = -float("inf")
        token = logits.argmax(-1).view(-1, 1, 1)
        out.append(token.view(-1))
    rows = torch.stack(out, dim=1).tolist()
    return [row[:row.index(EOS)] if EOS in row else row for row in rows]


@pytest.mark.parametrize("name", list(CASES))
def test_opennmt_model_matches(name):
    onmt_model, opt, model = build(name)
    ids, lengths = sources()
    rng = np.random.default_rng(2)
    tgt = np.concatenate([np.full((len(lengths), 1), BOS), rng.integers(4, 15, (len(lengths), 5))], axis=1)
    with torch.no_grad():
        dec_out, attns = onmt_model(torch.tensor(ids).unsqueeze(-1), torch.tensor(tgt).unsqueeze(-1),
                                    torch.tensor(lengths))
        logits = onmt_model.generator(dec_out).numpy()
        att = attns["std"]
        att = (att.transpose(0, 1) if opt["input_feed"] else att).numpy()  # [B, T, S]
    tgt_in = tgt[:, :-1]
    assert np.abs(model.logits(ids, tgt_in, lengths) - logits).max() <= TOL
    state = model.start(ids, lengths, max_length=tgt_in.shape[1])
    for t in range(tgt_in.shape[1]):
        _, weights = model.step(state, tgt_in[:, t], with_attention=True)
        assert np.abs(weights - att[:, t]).max() <= TOL
    state.close()
    want = onmt_greedy(onmt_model, ids, lengths)
    assert len({tuple(w) for w in want}) > 1
    srcs = [list(ids[b, :n]) for b, n in enumerate(lengths)]
    assert [r.ids[0] for r in model.generate(srcs, max_length=MAX_LEN)] == want


@pytest.mark.parametrize("key,value,match", [
    ("bridge", True, r"option bridge=True"), ("context_gate", "both", r"option context_gate='both'"),
    ("copy_attn", True, r"option copy_attn=True"), ("global_attention_function", "sparsemax", r"sparsemax"),
    ("encoder_type", "transformer", r"encoder_type='transformer'"), ("dec_layers", 1, r"dec_layers/dec_hid_size"),
])
def test_unsupported_opennmt_options_are_named(key, value, match):
    onmt_model, opt, _ = build("brnn-gru-1-mlp-feed")
    with pytest.raises(ConfigError, match=match):
        from_opennmt(onmt_model.state_dict(), {**opt, key: value})


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
