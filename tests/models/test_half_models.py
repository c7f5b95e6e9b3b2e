"""16-bit models (``seqjit.quantize(model, "float16" | "bfloat16")``) of the three architectures
against PyTorch modules whose weights are the same 16-bit values (rounded by torch's own ``.to(dtype)``
and widened back): the same float32 model, so equal within float32 summation order, through the
Python and the native replay. Then the directory format (F16/BF16 tensors, checked at load), the
weights kept in 16 bits, convert and inspect."""
import json

import numpy as np
import pytest
import torch

import seqjit
from seqjit.convert import from_torch
from seqjit.errors import ModelFormatError
from seqjit.models.quantization import half_weight_names

from . import test_rnn_seq2seq as plain
from .test_attention_variants import batch as attention_batch
from .test_attention_variants import build as attention_build

FORMATS = {"float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = 1e-4
PAD = 95


def _rounded(module, names, dtype):
    """``module`` with the parameters ``names`` (state_dict names) rounded to ``dtype`` by torch and
    widened back to float32."""
    params = dict(module.named_parameters(remove_duplicate=False))
    with torch.no_grad():
        for name in names:
            params[name].copy_(params[name].to(dtype).float())
    return module


def _bits(t, dtype) -> np.ndarray:
    return t.detach().to(dtype).view(torch.int16).numpy().view(np.uint16)


def _replays(model):
    for replay in ("python", "native"):
        model.set_replay(replay)
        yield replay
    model.set_replay(None)


@pytest.fixture(scope="module")
def marian32(tmp_path_factory, make_tiny_marian):
    path = tmp_path_factory.mktemp("marian32")
    make_tiny_marian().save_pretrained(path, safe_serialization=True)
    return seqjit.from_hf(path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_marian_half_matches_transformers_on_the_16_bit_weights(fmt, marian32, make_tiny_marian, marian_generate):
    dtype = FORMATS[fmt]
    half = seqjit.quantize(marian32, fmt)
    hf = make_tiny_marian()
    linears = [f"{n}.weight" for n, m in hf.named_modules() if isinstance(m, torch.nn.Linear)]
    ref = _rounded(hf, linears + ["model.shared.weight"], dtype)  # lm_head is tied to the shared table
    np.testing.assert_array_equal(half.weights["shared.weight"], _bits(make_tiny_marian().model.shared.weight, dtype))
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, PAD, (6, 12)), rng.integers(1, PAD, (6, 9))
    tgt[:, 0] = PAD
    with torch.inference_mode():
        want = ref(input_ids=torch.tensor(src), decoder_input_ids=torch.tensor(tgt)).logits.numpy()
    assert np.abs(want - marian32.logits(src, tgt)).max() > 10 * TOL  # the rounding is visible
    sources = [rng.integers(1, PAD, int(rng.integers(3, 14))).tolist() for _ in range(50)]
    out = marian_generate(ref, sources, num_beams=1, max_new_tokens=12)
    ids = [row[:row.index(0) + 1] if 0 in row else row for row in out[:, 1:].tolist()]
    for replay in _replays(half):
        np.testing.assert_allclose(half.logits(src, tgt), want, rtol=TOL, atol=TOL, err_msg=replay)
        np.testing.assert_allclose(half.logits_stepwise(src, tgt), want, rtol=TOL, atol=TOL, err_msg=replay)
        assert [r.ids[0] for r in half.generate(sources, max_length=12)] == ids, replay


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["lstm-2-bi-linear-tanh", "gru-1-bi-linear"])
def test_rnn_half_matches_pytorch_on_the_16_bit_weights(fmt, name):
    kw = plain.PLAIN[name]
    torch.manual_seed(1)
    ref = plain.Plain(**kw).eval()
    model = seqjit.quantize(from_torch(ref.state_dict(), arch="rnn_seq2seq", bridge_activation="tanh"
                                       if kw.get("tanh") else None), fmt)
    names = half_weight_names(model.config, model.weights)
    assert "decoder.out.weight" in names and "bridge.weight" in names
    assert all(not n.startswith(("encoder.rnn", "decoder.rnn")) for n in names)  # float32: no 16-bit recurrence
    _rounded(ref, names, FORMATS[fmt])
    src, lengths, tgt = plain.batch()
    with torch.no_grad():
        want = ref(src, lengths, tgt).numpy()
    for replay in _replays(model):
        got = model.logits(src.numpy(), tgt.numpy(), lengths.numpy())
        assert plain.max_err(got, want) <= TOL, replay
        assert plain.max_err(model.logits_stepwise(src.numpy(), tgt.numpy(), lengths.numpy()), want) <= TOL, replay


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["general-2-concat-deep", "mlp-relu", "feeding-bahdanau-notanh-nobias"])
def test_attention_rnn_half_matches_pytorch_on_the_16_bit_weights(fmt, name):
    ref, fp32 = attention_build(name)
    model = seqjit.quantize(fp32, fmt)
    names = half_weight_names(model.config, model.weights)
    assert "decoder.out.weight" in names
    _rounded(ref, names, FORMATS[fmt])
    src, lengths, tgt = attention_batch()
    expected = [ref.teacher_forced(src[b:b + 1, :n], tgt[b:b + 1])[0] for b, n in enumerate(lengths.tolist())]
    for replay in _replays(model):
        got = model.logits_stepwise(src.numpy(), tgt.numpy(), lengths.numpy())
        for b in range(len(expected)):
            assert plain.max_err(got[b], expected[b]) <= TOL, (replay, b)


@pytest.mark.parametrize("fmt", FORMATS)
def test_half_model_directory_round_trip(fmt, marian32, tmp_path):
    from seqjit.models.weights_file import read_header

    half = seqjit.quantize(marian32, fmt)
    half.save(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["quantization"] == fmt
    entries, _ = read_header(tmp_path / "model.safetensors")
    names = half_weight_names(half.config, half.weights)
    # every projection of 2 + 2 layers, and the shared embedding (also the tied output projection)
    assert "shared.weight" in names and len(names) == 2 * 6 + 2 * 10 + 1
    assert {entries[n].code for n in names} == {"F16" if fmt == "float16" else "BF16"}
    assert {e.code for n, e in entries.items() if n not in names} == {"F32"}
    loaded = seqjit.load(tmp_path)
    for name in names:
        assert loaded.weights[name].dtype == np.uint16
        np.testing.assert_array_equal(loaded.weights[name], half.weights[name])
    src, tgt = np.array([[5, 9, 3, 2]]), np.array([[PAD, 7, 8]])
    np.testing.assert_array_equal(loaded.logits(src, tgt), half.logits(src, tgt))
    total, halved = (sum(w.nbytes for w in m.weights.values()) for m in (marian32, half))
    print(f"\ntiny Marian {fmt}: weight bytes in memory {halved / total:.1%} of float32")
    # the 16-bit weights at half their bytes; the layer norms and biases (4 % at d_model 32) as they were
    assert halved == total - sum(marian32.weights[n].nbytes for n in names) // 2


def test_half_weights_are_checked_at_load(marian32, tmp_path):
    from seqjit.models.weights_file import read_safetensors, write_safetensors

    seqjit.quantize(marian32, "bfloat16").save(tmp_path)
    path = tmp_path / "model.safetensors"
    weights, _ = read_safetensors(path, half_format="bfloat16")
    write_safetensors(path, weights, {"format": "seqjit"}, half_format="float16")  # BF16 bits labelled F16
    with pytest.raises(ModelFormatError, match="shared.weight has dtype float16, expected bfloat16"):
        seqjit.load(tmp_path)
    write_safetensors(path, weights, {"format": "seqjit"})  # anonymous U16
    with pytest.raises(ModelFormatError, match="fc1.weight has dtype uint16, expected bfloat16"):
        seqjit.load(tmp_path)
    weights["decoder.layers.0.fc1.weight"][0, 0] = 0x7F80  # +inf in bfloat16
    write_safetensors(path, weights, {"format": "seqjit"}, half_format="bfloat16")
    with pytest.raises(ModelFormatError, match="'decoder.layers.0.fc1.weight' holds 1 non-finite"):
        seqjit.load(tmp_path)


def test_float16_overflow_is_refused_by_name(marian32):
    weights = dict(marian32.weights)
    weights["encoder.layers.1.fc2.weight"] = weights["encoder.layers.1.fc2.weight"].copy()
    weights["encoder.layers.1.fc2.weight"][3, 4] = 70000.0  # beyond float16's 65504, fine in bfloat16
    big = type(marian32)(marian32.config, weights)
    with pytest.raises(ValueError, match="'encoder.layers.1.fc2.weight' has 1 value.*beyond the range of float16"):
        seqjit.quantize(big, "float16")
    assert seqjit.quantize(big, "bfloat16").weights["encoder.layers.1.fc2.weight"].dtype == np.uint16
    with pytest.raises(ValueError, match="already quantized"):
        seqjit.quantize(seqjit.quantize(marian32, "float16"), "bfloat16")


def test_bf16_checkpoint_quantized_to_bf16_keeps_its_bits(tmp_path, make_tiny_marian):
    from safetensors.torch import load_file

    make_tiny_marian().to(torch.bfloat16).save_pretrained(tmp_path, safe_serialization=True)
    half = seqjit.quantize(seqjit.from_hf(tmp_path), "bfloat16")
    theirs = load_file(tmp_path / "model.safetensors")
    for name in ("shared.weight", "decoder.layers.1.encoder_attn.k_proj.weight", "encoder.layers.0.fc1.weight"):
        np.testing.assert_array_equal(half.weights[name], theirs["model." + name].view(torch.int16).numpy()
                                      .view(np.uint16))


@pytest.mark.parametrize("fmt", FORMATS)
def test_convert_quantize_half_and_inspect(fmt, tmp_path, make_tiny_marian):
    from seqjit.cli import main
    from seqjit.commands.inspect import describe, format_text

    make_tiny_marian().save_pretrained(tmp_path / "hf", safe_serialization=True)
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "q"), "--quantize", fmt]) == 0
    info = describe(seqjit.load(tmp_path / "q"))
    assert info["quantization"] == fmt and info["weights"]["dtypes"][fmt]["parameters"] > 0
    assert "uint16" not in info["weights"]["dtypes"]
    assert "linear_half" in info["graphs"]["decoder_step"] and "embedding_half" in info["graphs"]["encoder"]
    assert "linear" not in info["graphs"]["decoder_step"]
    assert f"quantization: {fmt}" in format_text(info)
