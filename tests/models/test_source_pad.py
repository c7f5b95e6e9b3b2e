"""A model whose padding id (a target id) lies outside its smaller source vocabulary, as a real
transliteration LSTM has (source characters 28, target 90, pad 80): it loads, prepares, and decodes
a batch of unequal sources as each alone and as a plain-PyTorch reference (each source alone, no
padding); the source side's own pad id is checked against the source vocabulary."""
import importlib.util
from pathlib import Path

import pytest
import torch

import seqjit
from seqjit.convert import from_torch
from seqjit.errors import ConfigError

VS, VT, PAD, START, EOS = 28, 90, 80, 1, 2
SOURCES = [[5, 9, 27, 3, 14, 7], [11, 4], [20, 6, 8, 25]]


def _reference():
    path = Path(__file__).with_name("rnn_variant_reference.py")
    spec = importlib.util.spec_from_file_location("rnn_variant_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VariantSeq2Seq


def build(**config):
    torch.manual_seed(3)
    ref = _reference()(VS, VT, cell="lstm", bridge="mean", score="general", feeding=True).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.mul_(2.0)
    model = from_torch(ref.state_dict(), arch="attention_seq2seq", bridge="mean", bridge_activation="tanh",
                       bridge_cell="hidden", pad_id=PAD, decoder_start_id=START, eos_id=EOS, **config)
    return ref, model


@pytest.mark.parametrize("replay", ["python", "native"])
def test_pad_outside_the_source_vocabulary_loads_and_decodes(replay, tmp_path):
    ref, model = build()  # from_torch prepare()s the model
    assert model.source_pad_id == 0 and model.pad_id == PAD
    model.save(tmp_path)
    model = seqjit.load(tmp_path)  # load prepares too
    model.set_replay(replay)
    want = [ref.greedy(torch.tensor([s]), START, EOS, {PAD}, 10) for s in SOURCES]
    batched = [r.ids[0] for r in model.generate(SOURCES, max_length=10)]
    alone = [model.generate([s], max_length=10)[0].ids[0] for s in SOURCES]
    assert batched == alone == want
    assert any(len(ids) > 2 for ids in want)  # the reference decodes something to compare
    beams = [r.ids[0] for r in model.generate(SOURCES, max_length=10, beam_size=3)]
    assert beams == [model.generate([s], max_length=10, beam_size=3)[0].ids[0] for s in SOURCES]


def test_explicit_source_pad_is_used_and_checked():
    _, model = build(src_pad_id=27)
    assert model.source_pad_id == 27
    got = [r.ids[0] for r in model.generate(SOURCES, max_length=6)]
    assert got == [model.generate([s], max_length=6)[0].ids[0] for s in SOURCES]
    with pytest.raises(ConfigError, match=r"src_pad_id 28 is outside the source vocabulary \[0, 28\)"):
        model.config.replace(src_pad_id=28)
