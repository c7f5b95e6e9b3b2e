"""``seqjit convert``: a Hugging Face MarianMT directory and a .safetensors state dict to a seqjit
model directory, checked against the source model's logits in PyTorch/transformers."""
import json

import numpy as np
import pytest

import seqjit

import torch

TOL = 1e-4
TOKENIZER = {"source.spm": b"spm-source", "target.spm": b"spm-target", "vocab.json": b'{"</s>": 0}',
             "tokenizer_config.json": b"{}"}


def test_from_hf_directory(cli, marian, helpers, tmp_path):
    hf, hf_dir, _ = marian
    src = tmp_path / "hf"
    src.mkdir()
    for name in ("config.json", "model.safetensors"):
        (src / name).write_bytes((hf_dir / name).read_bytes())
    for name, data in TOKENIZER.items():
        (src / name).write_bytes(data)
    code, out, err = cli("convert", src, tmp_path / "out")
    assert code == 0, err
    for name in ("config.json", "model.safetensors", *TOKENIZER):
        assert f"wrote {tmp_path / 'out' / name}" in out
        if name in TOKENIZER:
            assert (tmp_path / "out" / name).read_bytes() == TOKENIZER[name]
    assert "transformer model" in out and "translate --model" in out
    model = seqjit.load(tmp_path / "out")
    src_ids = torch.tensor([[5, 6, 7, 8, 0], [9, 10, 0, helpers.PAD, helpers.PAD]])
    mask = (src_ids != helpers.PAD).long()
    tgt = torch.tensor([[helpers.PAD, 3, 4, 11], [helpers.PAD, 5, 6, 12]])
    with torch.no_grad():
        want = hf(input_ids=src_ids, attention_mask=mask, decoder_input_ids=tgt).logits.numpy()
    got = model.logits(src_ids.numpy(), tgt.numpy(), mask.sum(1).numpy())
    np.testing.assert_allclose(got, want, atol=TOL, rtol=0)


def _state_dict_file(helpers, tmp_path):
    from safetensors.torch import save_file

    ref = helpers.gru_seq2seq(seed=2)
    path = tmp_path / "gru.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    return ref, path


@pytest.mark.parametrize("config_as", ["inline", "file"])
def test_from_state_dict(cli, helpers, tmp_path, config_as):
    ref, path = _state_dict_file(helpers, tmp_path)
    config = {"pad_id": 0, "decoder_start_id": 1, "eos_id": 2}
    if config_as == "file":
        (tmp_path / "config.json").write_text(json.dumps(config))
        given = tmp_path / "config.json"
    else:
        given = json.dumps(config)
    code, out, err = cli("convert", path, tmp_path / "out", "--arch", "rnn_seq2seq", "--config", given)
    assert code == 0, err
    assert "rnn_seq2seq model" in out and f"wrote {tmp_path / 'out' / 'model.safetensors'}" in out
    model = seqjit.load(tmp_path / "out")
    assert (model.pad_id, model.decoder_start_id, model.eos_id) == (1 - 1, 1, 2)
    assert sum(w.size for w in model.weights.values()) == sum(p.numel() for p in ref.parameters())
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, 11, (3, 6), generator=g)
    lengths = torch.tensor([6, 2, 4])
    tgt = torch.randint(0, 13, (3, 5), generator=g)
    with torch.no_grad():
        want = ref(src, lengths, tgt).numpy()
    np.testing.assert_allclose(model.logits(src.numpy(), tgt.numpy(), lengths.numpy()), want, atol=TOL, rtol=0)


def test_dtype_float64(cli, helpers, tmp_path):
    _, path = _state_dict_file(helpers, tmp_path)
    code, out, err = cli("convert", path, tmp_path / "out", "--arch", "rnn_seq2seq", "--dtype", "float64")
    assert code == 0, err
    assert {w.dtype for w in seqjit.load(tmp_path / "out").weights.values()} == {np.dtype("float64")}


def test_errors(cli, marian, helpers, tmp_path):
    _, hf_dir, sj_dir = marian
    _, path = _state_dict_file(helpers, tmp_path)

    def error(*argv):
        code, out, err = cli("convert", *argv)
        assert code == 2 and err.startswith("seqjit: error: "), (code, err)
        return err

    assert "nope does not exist" in error(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    assert "neither a Hugging Face model directory" in error(tmp_path / "empty", tmp_path / "out")
    (tmp_path / "model.bin").write_bytes(b"\x80\x04")
    assert "neither a Hugging Face model directory" in error(tmp_path / "model.bin", tmp_path / "out")
    assert "already a seqjit model directory" in error(sj_dir, tmp_path / "out")
    assert "give its architecture with --arch" in error(path, tmp_path / "out")
    assert "unknown arch 'lstm'" in error(path, tmp_path / "out", "--arch", "lstm")
    assert "not valid JSON" in error(path, tmp_path / "out", "--arch", "rnn_seq2seq", "--config", "{pad_id: 0}")
    assert "must be a JSON object" in error(path, tmp_path / "out", "--arch", "rnn_seq2seq", "--config", "[1]")
    assert "neither a JSON object nor an existing file" in error(path, tmp_path / "out", "--arch", "rnn_seq2seq",
                                                                  "--config", tmp_path / "missing.json")
    assert "apply to a .safetensors state dict" in error(hf_dir, tmp_path / "out", "--arch", "transformer")
    (tmp_path / "broken.safetensors").write_bytes(b"garbage")
    assert "not a readable safetensors file" in error(tmp_path / "broken.safetensors", tmp_path / "out",
                                                      "--arch", "rnn_seq2seq")
    assert not (tmp_path / "out").exists()  # nothing written on an error

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    assert "not empty" in error(path, tmp_path / "out", "--arch", "rnn_seq2seq")
    code, _, err = cli("convert", path, tmp_path / "out", "--arch", "rnn_seq2seq", "--force")
    assert code == 0, err
    seqjit.load(tmp_path / "out")
