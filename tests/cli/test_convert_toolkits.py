"""``seqjit convert W.safetensors OUT --from joeynmt|opennmt --config OPTIONS``: a toolkit's RNN
(context gate included) or Transformer state dict (exported to safetensors) and its own options give the model that
:func:`seqjit.convert.from_joeynmt` / ``from_opennmt`` give. The toolkit models come from the
model tests' builders (each toolkit's own model builder); marked ``toolkit`` (``.ci/toolkits``)."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import seqjit

MODELS = Path(__file__).parent.parent / "models"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, MODELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.toolkit
@pytest.mark.parametrize("toolkit,kind,case", [("joeynmt", "rnn", "lstm-luong-last-2x2"),
                                               ("opennmt", "rnn", "brnn-gru-1-mlp-feed"),
                                               ("opennmt", "rnn", "brnn-lstm-2-general-feed-gate-both"),
                                               ("joeynmt", "transformer", "post-1x2"),
                                               ("opennmt", "transformer", "1x2-gelu")])
def test_convert_from_toolkit(cli, tmp_path, toolkit, kind, case):
    from safetensors.torch import save_file

    tests = _module(f"test_{toolkit}_{kind}")
    built, options, model = tests.build(case)
    save_file({k: v.contiguous() for k, v in built.state_dict().items()}, tmp_path / "w.safetensors")
    (tmp_path / "options.json").write_text(json.dumps(options))
    code, out, err = cli("convert", tmp_path / "w.safetensors", tmp_path / "out", "--from", toolkit,
                         "--config", tmp_path / "options.json")
    assert code == 0, err
    assert f"{toolkit} state dict" in out
    loaded = seqjit.load(tmp_path / "out")
    assert loaded.config == model.config
    ids, lengths = (tests.R if kind == "transformer" else tests).sources()
    tgt = np.full((len(lengths), 3), 5)
    np.testing.assert_array_equal(loaded.logits(ids, tgt, lengths), model.logits(ids, tgt, lengths))


def test_convert_from_toolkit_needs_its_options(cli, tmp_path):
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(2, np.float32)}, tmp_path / "w.safetensors")
    code, _, err = cli("convert", tmp_path / "w.safetensors", tmp_path / "out", "--from", "joeynmt")
    assert code != 0 and "--from joeynmt needs the toolkit's options as --config" in err
    code, _, err = cli("convert", tmp_path / "w.safetensors", tmp_path / "out2", "--from", "opennmt", "--arch",
                       "attention_seq2seq", "--config", "{}")
    assert code != 0 and "--arch applies to --from torch" in err
