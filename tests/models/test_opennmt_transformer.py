"""OpenNMT-py Transformers built by OpenNMT-py's own ``build_base_model`` from its option parser
(random weights), imported with :func:`seqjit.convert.from_opennmt`, against OpenNMT-py's own code:
teacher-forced logits (``NMTModel.forward`` + ``generator``) and the ids of its ``Translator``
(``GreedySearch`` at beam 1, ``BeamSearch`` at beam 4, no length penalty) on 200 sources. OpenNMT-py's
searches ban no token; the converted config records that. Marked ``toolkit``.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from seqjit.convert import from_opennmt
from seqjit.errors import ConfigError

pytestmark = pytest.mark.toolkit


def _rnn_tests():
    spec = importlib.util.spec_from_file_location("onmt_rnn_tests", Path(__file__).with_name("test_opennmt_rnn.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R = _rnn_tests()
N_SOURCES = 200
CASES = {
    "2x1-relu": ["-enc_layers", "2", "-dec_layers", "1"],
    "1x2-gelu": ["-enc_layers", "1", "-dec_layers", "2", "-pos_ffn_activation_fn", "gelu"],
}


#: weight seeds whose models tell the 200 sources apart (others map most sources to a few outputs)
SEEDS = {"2x1-relu": 2, "1x2-gelu": 0}  # picked again for OpenNMT-py 3.5's draws


def build(name, seed=None):
    o = R._onmt()
    parser = o.ArgumentParser()
    o.opts.model_opts(parser)
    o.opts._add_train_general_opts(parser)
    o.opts.distributed_opts(parser)  # 3.5: the encoder reads parallel_mode
    opt = parser.parse_known_args(["-encoder_type", "transformer", "-decoder_type", "transformer", "-position_encoding",
                                   "-heads", "2", "-hidden_size", "8", "-word_vec_size", "8", "-transformer_ff", "12",
                                   *CASES[name]])[0]
    o.ArgumentParser.update_model_opts(opt)
    o.ArgumentParser.validate_model_opts(opt)
    torch.manual_seed(SEEDS[name] if seed is None else seed)
    onmt_model = R.build_base(opt, R.vocabularies())
    with torch.no_grad():  # uniform(-0.1, 0.1) -> (-1, 1), norm gains 1 -> 10: outputs that tell sources apart
        for p in onmt_model.parameters():
            p.mul_(10.0)
    return onmt_model, vars(opt), from_opennmt(onmt_model.state_dict(), vars(opt))


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.filterwarnings("ignore")
def test_opennmt_transformer_matches(name):
    onmt_model, opt, model = build(name)
    assert not model.config.suppress_pad_token and not model.config.suppress_tokens
    ids, lengths = R.sources(n=N_SOURCES)
    rng = np.random.default_rng(2)
    tgt = np.concatenate([np.full((len(lengths), 1), R.BOS), rng.integers(4, 15, (len(lengths), 5))], axis=1)
    with torch.no_grad():
        dec_out, _ = onmt_model(torch.tensor(ids).unsqueeze(-1), torch.tensor(tgt).unsqueeze(-1), torch.tensor(lengths))
        logits = onmt_model.generator(dec_out).numpy()
    assert np.abs(model.logits(ids, tgt[:, :-1], lengths) - logits).max() <= R.TOL
    srcs = [list(ids[b, :n]) for b, n in enumerate(lengths)]
    for beam_size in (1, 4):
        want = R.translate(onmt_model, ids, lengths, beam_size)
        assert len({tuple(w) for w in want}) >= 10  # the sources are told apart
        found = model.generate(srcs, max_length=R.MAX_LEN, beam_size=beam_size, length_penalty=0.0)
        assert [r.ids[0] for r in found] == want, beam_size


@pytest.mark.parametrize("key,value,match", [
    ("max_relative_positions", 20, r"option max_relative_positions=20"), ("add_qkvbias", True, r"add_qkvbias=True"),
    ("self_attn_type", "average", r"self_attn_type='average'"), ("decoder_type", "rnn", r"not a mix"),
])
def test_unsupported_transformer_options_are_named(key, value, match):
    onmt_model, opt, _ = build("2x1-relu")
    with pytest.raises(ConfigError, match=match):
        from_opennmt(onmt_model.state_dict(), {**opt, key: value})
