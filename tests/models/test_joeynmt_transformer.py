"""JoeyNMT Transformers built by JoeyNMT's own ``build_model`` from a config dict (random weights),
imported with :func:`seqjit.convert.from_joeynmt`, against JoeyNMT's own code: teacher-forced logits
(``Model(return_type="decode")``), ``search.transformer_greedy`` ids and ``search.beam_search`` ids
(beam 4, no length penalty) on 200 sources. Marked ``toolkit`` (``.ci/toolkits``).

JoeyNMT's ``transformer_greedy`` bans ``<s>`` but not ``<pad>``, its ``beam_search`` bans both, and
both end no output at step 0: the converted config records the greedy bans (``suppress_tokens``,
``suppress_pad_token``), the beam comparison passes ``suppress_pad_token=True``, both ``min_length=1``.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from seqjit.convert import from_joeynmt
from seqjit.errors import ConfigError

pytestmark = pytest.mark.toolkit


def _rnn_tests():
    spec = importlib.util.spec_from_file_location("joey_rnn_tests", Path(__file__).with_name("test_joeynmt_rnn.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R = _rnn_tests()
PAD, BOS, EOS = R.PAD, R.BOS, R.EOS
MAX_LEN = 7
N_SOURCES = 200
CASES = {
    "pre-2x1-scaled": dict(layer_norm="pre", enc_layers=2, dec_layers=1, scale=True),
    "post-1x2": dict(layer_norm="post", enc_layers=1, dec_layers=2, scale=False),
}

#: weight seeds whose models tell the 200 sources apart (others map most sources to a few outputs); with
#: JoeyNMT 2.3's draws, post-1x2's earlier seed 3 gave a model whose float32 logits, JoeyNMT's own as
#: much as seqjit's, lie 2.5e-4 from its float64 ones: past TOL for either, so another seed
SEEDS = {"pre-2x1-scaled": 1, "post-1x2": 12}


def joey_config(layer_norm, enc_layers, dec_layers, scale):
    side = dict(type="transformer", num_heads=2, hidden_size=8, ff_size=12, layer_norm=layer_norm)
    return {"initializer": "xavier_uniform", "init_gain": 3.0, "bias_initializer": "normal", "bias_init_weight": 0.5,
            "embed_initializer": "normal", "embed_init_weight": 1.0,
            "encoder": {**side, "num_layers": enc_layers, "embeddings": {"embedding_dim": 8, "scale": scale}},
            "decoder": {**side, "num_layers": dec_layers, "embeddings": {"embedding_dim": 8, "scale": scale}}}


def build(name, seed=None):
    from joeynmt.model import build_model
    from joeynmt.vocabulary import Vocabulary

    cfg = joey_config(**CASES[name])
    torch.manual_seed(SEEDS[name] if seed is None else seed)
    joey = build_model(cfg, src_vocab=Vocabulary([f"s{i}" for i in range(9)], R.SPECIALS),
                       trg_vocab=Vocabulary([f"t{i}" for i in range(11)], R.SPECIALS)).eval()
    return joey, cfg, from_joeynmt(joey.state_dict(), cfg)


@pytest.mark.parametrize("name", list(CASES))
def test_joeynmt_transformer_matches(name):
    from joeynmt.search import beam_search, transformer_greedy

    joey, cfg, model = build(name)
    assert tuple(model.config.suppress_tokens) == (BOS,) and not model.config.suppress_pad_token
    ids, lengths = R.sources(n=N_SOURCES)
    rng = np.random.default_rng(2)
    tgt = np.concatenate([np.full((len(lengths), 1), BOS), rng.integers(4, 15, (len(lengths), 5))], axis=1)
    src = torch.tensor(ids)
    mask = (src != PAD).unsqueeze(1)
    with torch.no_grad():
        out, _, _, _ = joey(return_type="encode", src=src, src_length=torch.tensor(lengths), src_mask=mask)
        trg_mask = torch.ones(1, 1, tgt.shape[1], dtype=torch.bool)
        logits, _, _, _ = joey(return_type="decode", encoder_output=out, encoder_hidden=None, src_mask=mask,
                               trg_input=torch.tensor(tgt), unroll_steps=tgt.shape[1], trg_mask=trg_mask)
        greedy = transformer_greedy(mask, MAX_LEN, joey, out, None)[0].numpy()
        beam = beam_search(joey, 4, out, None, mask, MAX_LEN, alpha=-1)[0].numpy()
    assert np.abs(model.logits(ids, tgt, lengths) - logits.numpy()).max() <= R.TOL
    srcs = [list(ids[b, :n]) for b, n in enumerate(lengths)]
    want = [R.cut(r) for r in greedy]
    assert len({tuple(w) for w in want}) >= 10  # the sources are told apart
    assert [r.ids[0] for r in model.generate(srcs, max_length=MAX_LEN, min_length=1)] == want
    # JoeyNMT's beam_search bans <pad> too (its transformer_greedy does not): the option says so here
    found = model.generate(srcs, max_length=MAX_LEN, min_length=1, beam_size=4, length_penalty=0.0,
                           suppress_pad_token=True)
    assert [r.ids[0] for r in found] == [R.cut(r) for r in beam]


def test_unsupported_transformer_options_are_named():
    joey, cfg, _ = build("pre-2x1-scaled")
    sd = joey.state_dict()
    for side, key, value, match in (("encoder", "layer_norm", "post", r"encoder.layer_norm 'post' and decoder"),
                                    ("decoder", "alpha", 2.0, r"decoder.alpha 2.0"),
                                    ("encoder", "activation", "gelu", r"encoder.activation 'gelu'"),
                                    ("decoder", "type", "recurrent", r"encoder.type 'transformer' and decoder.type 'recurrent' differ")):
        with pytest.raises(ConfigError, match=match):
            from_joeynmt(sd, {**cfg, side: {**cfg[side], key: value}})
