"""JoeyNMT recurrent models built by JoeyNMT's own ``build_model`` from a config dict (random
weights), imported with :func:`seqjit.convert.from_joeynmt` from the in-memory ``state_dict``, and
checked against JoeyNMT's own code on 200 sources: teacher-forced logits and attention
(``Model(return_type="decode")``), ``search.recurrent_greedy`` ids and ``search.beam_search`` ids
(beam 4, no length penalty). Variants: GRU/LSTM, Bahdanau/Luong, every ``init_hidden`` (bridge,
last, zero), input feeding on and off, 1-2 layers, scaled embeddings. Marked ``toolkit`` (``.ci/toolkits``).

JoeyNMT's searches never emit ``<s>`` or ``<pad>`` and end no hypothesis at step 0: the converted
config records the bans (``suppress_tokens``, ``suppress_pad_token``), which seqjit's searches read,
and the test passes ``min_length=1``.
"""
from types import SimpleNamespace

import numpy as np
import pytest

import torch

from seqjit.convert import from_joeynmt
from seqjit.errors import ConfigError

#: JoeyNMT's own code: not in the test extra (it would change the benchmark peers' packages), so these
#: tests are deselected from the default run; ``.ci/toolkits`` runs them in a venv of their own
pytestmark = pytest.mark.toolkit


def _joeynmt():
    """JoeyNMT's builder, searches and vocabulary, imported when a test runs (the module is collected
    without JoeyNMT)."""
    from joeynmt.model import build_model
    from joeynmt.search import beam_search, recurrent_greedy
    from joeynmt.vocabulary import Vocabulary

    return SimpleNamespace(build_model=build_model, beam_search=beam_search, recurrent_greedy=recurrent_greedy,
                           Vocabulary=Vocabulary)

UNK, PAD, BOS, EOS = 0, 1, 2, 3
TOL = 1e-4
MAX_LEN = 7
SPECIALS = SimpleNamespace(unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_id=UNK,
                           pad_id=PAD, bos_id=BOS, eos_id=EOS, sep_token=None, lang_tags=[])

CASES = {
    "gru-bahdanau-bridge-feeding": dict(rnn_type="gru", attention="bahdanau", init_hidden="bridge"),
    "lstm-luong-last-2x2": dict(rnn_type="lstm", attention="luong", init_hidden="last", num_layers=2),
    "gru-luong-zero-nofeeding-2x1": dict(rnn_type="gru", attention="luong", init_hidden="zero", input_feeding=False,
                                         enc_layers=2),
    "lstm-bahdanau-bridge-nofeeding-1x2": dict(rnn_type="lstm", attention="bahdanau", init_hidden="bridge",
                                               input_feeding=False, num_layers=2, dec_hidden=10),
    "gru-bahdanau-bridge-scaled-embeddings": dict(rnn_type="gru", attention="bahdanau", init_hidden="bridge",
                                                  scale=True),
}


def joey_config(rnn_type, attention, init_hidden, num_layers=1, enc_layers=None, input_feeding=True, dec_hidden=None,
                scale=False):
    enc_hidden = 6
    return {
        "initializer": "normal", "init_weight": 0.5, "bias_initializer": "normal", "bias_init_weight": 0.5,
        "embed_initializer": "normal", "embed_init_weight": 1.0,
        "encoder": {"type": "recurrent", "rnn_type": rnn_type, "hidden_size": enc_hidden, "bidirectional": True,
                    "num_layers": enc_layers or num_layers, "embeddings": {"embedding_dim": 5, "scale": scale}},
        "decoder": {"type": "recurrent", "rnn_type": rnn_type, "hidden_size": dec_hidden or enc_hidden,
                    "num_layers": num_layers, "attention": attention, "init_hidden": init_hidden,
                    "input_feeding": input_feeding, "embeddings": {"embedding_dim": 4, "scale": scale}},
    }


def build(name, seed=0):
    cfg = joey_config(**CASES[name])
    src_vocab = _joeynmt().Vocabulary([f"s{i}" for i in range(9)], SPECIALS)
    trg_vocab = _joeynmt().Vocabulary([f"t{i}" for i in range(11)], SPECIALS)
    torch.manual_seed(seed)
    joey = _joeynmt().build_model(cfg, src_vocab=src_vocab, trg_vocab=trg_vocab).eval()
    return joey, cfg, from_joeynmt(joey.state_dict(), cfg)


#: the greedy and beam comparison's sources
N_SOURCES = 200


def sources(seed=1, n=5):
    """Sources longest first (JoeyNMT's encoder packs a sorted batch), padded with JoeyNMT's <pad>."""
    rng = np.random.default_rng(seed)
    lengths = sorted([7, 5, 5, 3, 1] + list(rng.integers(1, 10, n - 5)), reverse=True)
    ids = np.full((len(lengths), max(lengths)), PAD, np.int64)
    for b, n in enumerate(lengths):
        ids[b, :n] = rng.integers(4, 13, n)
    return ids, np.array(lengths)


def joey_encode(joey, ids, lengths):
    src = torch.tensor(ids)
    mask = (src != PAD).unsqueeze(1)
    out, hidden, _, _ = joey(return_type="encode", src=src, src_length=torch.tensor(lengths), src_mask=mask)
    return out, hidden, mask


def cut(row) -> list:
    row = [int(t) for t in row]
    return row[:row.index(EOS)] if EOS in row else row


def recorded_bans(model) -> tuple:
    """The bans the converted config records (``suppress_tokens``, ``suppress_pad_token``), which seqjit's
    decoding reads (``resolve_rules``): with them, seqjit's searches must give the toolkit's own."""
    c = model.config
    return tuple(c.suppress_tokens or ()) + ((c.pad_id,) if c.suppress_pad_token else ())


@pytest.mark.parametrize("name", list(CASES))
def test_joeynmt_model_matches(name):
    joey, cfg, model = build(name)
    assert recorded_bans(model) == (BOS, PAD)  # JoeyNMT's searches ban <s> and <pad>
    ids, lengths = sources(n=N_SOURCES)
    rng = np.random.default_rng(2)
    tgt = np.concatenate([np.full((len(lengths), 1), BOS), rng.integers(4, 15, (len(lengths), 5))], axis=1)
    with torch.no_grad():
        out, hidden, mask = joey_encode(joey, ids, lengths)
        logits, _, att, _ = joey(return_type="decode", encoder_output=out, encoder_hidden=hidden, src_mask=mask,
                                 trg_input=torch.tensor(tgt), unroll_steps=tgt.shape[1])
        greedy = _joeynmt().recurrent_greedy(mask, MAX_LEN, joey, out, hidden)[0].numpy()
        beam = _joeynmt().beam_search(joey, 4, out, hidden, mask, MAX_LEN, alpha=-1)[0].numpy()
    got = model.logits(ids, tgt, lengths)
    assert np.abs(got - logits.numpy()).max() <= TOL
    state = model.start(ids, lengths, max_length=tgt.shape[1])
    for t in range(tgt.shape[1]):
        _, weights = model.step(state, tgt[:, t], with_attention=True)
        assert np.abs(weights - att[:, t].numpy()).max() <= TOL
    state.close()
    srcs = [list(ids[b, :n]) for b, n in enumerate(lengths)]
    assert [r.ids[0] for r in model.generate(srcs, max_length=MAX_LEN, min_length=1)] == [cut(r) for r in greedy]
    assert len({tuple(cut(r)) for r in greedy}) >= 10  # the sources are told apart
    found = model.generate(srcs, max_length=MAX_LEN, min_length=1, beam_size=4, length_penalty=0.0)
    assert [r.ids[0] for r in found] == [cut(r) for r in beam]


def test_unsupported_joeynmt_options_are_named():
    cfg = joey_config("gru", "bahdanau", "bridge")
    joey = build("gru-bahdanau-bridge-feeding")[0]
    sd = joey.state_dict()
    for change, match in ((("decoder", "type", "transformer"), r"decoder\.type 'transformer'"),
                          (("decoder", "activation", "relu"), r"decoder\.activation 'relu'"),
                          (("decoder", "init_hidden", "mean"), r"decoder\.init_hidden 'mean'"),
                          (("decoder", "layer_norm", True), r"decoder option\(s\) \['layer_norm'\]")):
        side, key, value = change
        bad = {**cfg, side: {**cfg[side], key: value}}
        with pytest.raises(ConfigError, match=match):
            from_joeynmt(sd, bad)


def test_checkpoint_read_without_running_code(tmp_path):
    """The documented path: a checkpoint laid out as JoeyNMT saves one (``model_state`` and training
    counters) read with ``torch.load(..., weights_only=True)``."""
    joey, cfg, model = build("lstm-luong-last-2x2")
    torch.save({"steps": 10, "model_state": joey.state_dict(), "best_ckpt_score": 1.5}, tmp_path / "best.ckpt")
    ckpt = torch.load(tmp_path / "best.ckpt", map_location="cpu", weights_only=True)
    ids, lengths = sources()
    tgt = np.full((len(lengths), 3), 5)
    np.testing.assert_array_equal(from_joeynmt(ckpt["model_state"], cfg).logits(ids, tgt, lengths),
                                  model.logits(ids, tgt, lengths))
