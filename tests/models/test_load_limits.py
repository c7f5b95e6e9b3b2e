"""Loading a model directory that lies: non-finite weights, switched-off checksums, config sizes the
weights contradict or no machine holds, config files that are not files, paths leaving the
directory, unsupported dtypes (issue 12, items 2, 3, 9, 10, 11, 12)."""
import json
import os
import shutil
import struct
import threading
import time
import warnings
import zlib

import numpy as np
import pytest

import seqjit
from seqjit.errors import ChecksumWarning, ConfigError, ModelConfigError, ModelFormatError
from seqjit.models.io import write_safetensors
from seqjit.models.rnn_seq2seq import RNNSeq2SeqConfig, RNNSeq2SeqModel
from seqjit.models.transformer import TransformerConfig, TransformerModel

CONFIG = TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, d_model=8, encoder_layers=1, decoder_layers=1,
                           encoder_heads=2, decoder_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, max_positions=16)
BUNDLED_GRU = os.path.join(os.path.dirname(seqjit.__file__), "g2p", "models", "gru")


def _weights(config=CONFIG, cls=TransformerModel, seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s.shape).astype(s.dtype) for k, s in cls.weight_spec(config).items()}


@pytest.fixture
def saved(tmp_path):
    TransformerModel(CONFIG, _weights()).save(tmp_path / "m")
    return tmp_path / "m"


def _edit_header(path, edit):
    """Rewrite safetensors file ``path`` with ``edit(header_dict)`` applied (data region unchanged)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    edit(header)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def _edit_config(directory, **changes):
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _loads_within(seconds, fn):
    """``fn()``'s exception (or None), failing when it runs longer than ``seconds`` (a hang)."""
    box = {}

    def run():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["exc"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return box.get("exc")


# -- item 2: NaN / Inf weights ----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_weight_is_refused_naming_the_tensor(tmp_path, bad):
    w = _weights()
    w["decoder.layers.0.fc1.weight"][3, 5] = bad
    TransformerModel(CONFIG, w).save(tmp_path)
    with pytest.raises(ModelFormatError, match=r"tensor 'decoder.layers.0.fc1.weight' holds 1 non-finite.*"
                                               r"allow_nonfinite=True"):
        seqjit.load(tmp_path)
    model = seqjit.load(tmp_path, allow_nonfinite=True)  # the documented opt-out
    np.testing.assert_array_equal(model.weights["decoder.layers.0.fc1.weight"], w["decoder.layers.0.fc1.weight"])


def test_g2p_command_refuses_a_model_with_nan_weights(tmp_path, capsys):
    from seqjit.cli import main
    from seqjit.models.io import read_safetensors

    shutil.copytree(BUNDLED_GRU, tmp_path / "gru")
    weights, meta = read_safetensors(tmp_path / "gru" / "model.safetensors")
    name = sorted(weights)[0]
    weights[name].flat[0] = np.nan
    write_safetensors(tmp_path / "gru" / "model.safetensors", weights)
    assert main(["g2p", "--model", str(tmp_path / "gru"), "hello"]) == 2
    err = capsys.readouterr().err
    assert f"tensor {name!r} holds 1 non-finite" in err


def test_nonfinite_check_in_the_hf_importer(tmp_path):
    from seqjit.convert.common import read_hf_weights

    write_safetensors(tmp_path / "model.safetensors", {"model.x": np.array([1.0, np.nan], np.float32)})
    with pytest.raises(ModelFormatError, match="'model.x' holds 1 non-finite"):
        read_hf_weights(tmp_path)
    assert np.isnan(read_hf_weights(tmp_path, allow_nonfinite=True)["model.x"][1])


# -- item 3: the checksum metadata ----------------------------------------------------------------
def test_save_always_writes_checksums(saved):
    from seqjit.models.weights_file import CRC_KEY, read_header

    _, meta = read_header(saved / "model.safetensors")
    crcs = json.loads(meta[CRC_KEY])
    w = _weights()
    assert crcs == {name: zlib.crc32(arr.tobytes()) for name, arr in w.items()}


def test_missing_checksums_warn_and_load(saved):
    _edit_header(saved / "model.safetensors", lambda h: h.pop("__metadata__"))
    with pytest.warns(ChecksumWarning, match="model.safetensors carries no per-tensor checksums"):
        model = seqjit.load(saved)
    np.testing.assert_array_equal(model.weights["encoder.layers.0.fc1.bias"], _weights()["encoder.layers.0.fc1.bias"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TransformerModel(CONFIG, _weights()).save(saved)
        seqjit.load(saved)  # re-saved: checksums again, no warning


def _set_crc(value):
    return lambda h: h["__metadata__"].__setitem__("seqjit.crc32", value)


@pytest.mark.parametrize("value, message", [
    ("5", "must be a JSON object .* got int"),
    ("[]", "must be a JSON object .* got list"),
    ("{}", "has no entry for decoder"),
    ("{oops", "is not valid JSON"),
    ('"x"', "got str"),
])
def test_malformed_checksum_metadata_is_refused(saved, value, message):
    _edit_header(saved / "model.safetensors", _set_crc(value))
    with pytest.raises(ModelFormatError, match=message):
        seqjit.load(saved)


def test_checksum_entries_missing_extra_or_not_a_crc(saved):
    path = saved / "model.safetensors"
    crcs = json.loads(json.loads(path.read_bytes()[8:8 + struct.unpack("<Q", path.read_bytes()[:8])[0]])
                      ["__metadata__"]["seqjit.crc32"])
    for edited, message in [
        ({k: v for k, v in crcs.items() if k != "encoder.layers.0.fc2.bias"}, "has no entry for encoder.layers.0.fc2.bias"),
        ({**crcs, "ghost.weight": 7}, "names tensor.* the file lacks: ghost.weight"),
        ({**crcs, "encoder.layers.0.fc2.bias": "123"}, "holds '123' for 'encoder.layers.0.fc2.bias', not a CRC-32"),
        ({**crcs, "encoder.layers.0.fc2.bias": 1 << 40}, "not a CRC-32"),
    ]:
        TransformerModel(CONFIG, _weights()).save(saved)
        _edit_header(path, _set_crc(json.dumps(edited)))
        with pytest.raises(ModelFormatError, match=message):
            seqjit.load(saved)


# -- item 9: sizes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("key, value, message", [
    ("encoder_layers", 10 ** 9, "'encoder_layers' is 1000000000; seqjit allows at most 1024"),
    ("decoder_layers", 2000, "at most 1024"),
    ("max_positions", 10 ** 9, "'max_positions' is 1000000000; seqjit allows at most 65536"),
    ("src_vocab_size", 10 ** 30, r"outside the range seqjit supports \(\|n\| <= 2\*\*31 - 1\)"),
    ("layer_norm_eps", float("inf"), "'layer_norm_eps' must be a finite number, got inf"),
    ("layer_norm_eps", float("nan"), "must be a finite number, got nan"),
    ("layer_norm_eps", 10 ** 400, "must be a finite number"),
    ("layer_norm_eps", 5.0, "'layer_norm_eps' is 5.0; seqjit allows at most 1.0"),
])
def test_config_values_beyond_the_limits_are_config_errors(saved, key, value, message):
    _edit_config(saved, **{key: value})
    start = time.perf_counter()
    with pytest.raises(ModelConfigError, match=message) as info:
        seqjit.load(saved)
    assert time.perf_counter() - start < 1.0
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ModelFormatError)
    assert "config.json" in str(info.value)


def test_layer_norm_eps_infinity_in_the_json_text(saved):
    text = (saved / "config.json").read_text().replace('"layer_norm_eps": 1e-05', '"layer_norm_eps": Infinity')
    assert "Infinity" in text
    (saved / "config.json").write_text(text)
    with pytest.raises(ConfigError, match="'layer_norm_eps' must be a finite number, got inf"):
        seqjit.load(saved)


def test_rnn_num_layers_beyond_the_limit(tmp_path):
    cfg = RNNSeq2SeqConfig(src_vocab_size=7, tgt_vocab_size=9, hidden_size=4)
    RNNSeq2SeqModel(cfg, _weights(cfg, RNNSeq2SeqModel)).save(tmp_path)
    _edit_config(tmp_path, num_layers=10 ** 9)
    with pytest.raises(ModelConfigError, match="'num_layers' is 1000000000; seqjit allows at most 1024"):
        seqjit.load(tmp_path)
    _edit_config(tmp_path, num_layers=3)  # within the limits but contradicted by the weights
    with pytest.raises(ModelFormatError, match=r"missing weight\(s\): encoder.rnn.weight_ih_l1"):
        seqjit.load(tmp_path)


def test_config_contradicting_the_header_is_refused_before_reading_tensors(saved, monkeypatch):
    import safetensors

    def no_read(*args, **kwargs):
        raise AssertionError("tensors were read before the header was checked")

    monkeypatch.setattr(safetensors, "safe_open", no_read)
    _edit_config(saved, d_model=16, encoder_ffn_dim=4096)
    with pytest.raises(ModelFormatError, match=r"encoder.layers.0.fc1.weight has shape \[16, 8\], expected \[4096, 16\]"):
        seqjit.load(saved)
    _edit_config(saved, d_model=8, encoder_ffn_dim=16, encoder_layers=1000)
    with pytest.raises(ModelFormatError, match=r"missing weight\(s\): encoder.layers.1.* and \d+ more"):
        seqjit.load(saved)


# -- item 10: config.json that is not a small regular file ---------------------------------------
def test_config_fifo_is_refused_without_blocking(saved):
    (saved / "config.json").unlink()
    os.mkfifo(saved / "config.json")
    exc = _loads_within(5, lambda: seqjit.load(saved))
    assert isinstance(exc, ModelFormatError) and "config.json is a FIFO" in str(exc)


def test_config_linked_to_dev_zero_is_refused(saved):
    (saved / "config.json").unlink()
    os.symlink("/dev/zero", saved / "config.json")
    exc = _loads_within(5, lambda: seqjit.load(saved))
    assert isinstance(exc, ModelFormatError) and "outside the model directory" in str(exc)


def test_device_file_is_refused():
    from seqjit.models.files import read_json

    exc = _loads_within(5, lambda: read_json("/dev/zero"))
    assert isinstance(exc, ModelFormatError) and "/dev/zero is a device" in str(exc)


@pytest.mark.parametrize("text, message", [
    ("[" * 100_000 + "]" * 100_000, "nests JSON arrays or objects too deeply"),
    ('{"d_model": ' + "9" * 5000 + "}", "is not valid JSON"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    ('{"a": "' + "x" * (1 << 20) + '"}', "more than the 1048576 bytes"),
    ("[1, 2]", "must hold a JSON object, got list"),
])
def test_unparseable_configs_are_model_format_errors(saved, text, message):
    path = saved / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ModelFormatError, match=message):
        seqjit.load(saved)


def test_config_directory_is_refused(saved):
    (saved / "config.json").unlink()
    (saved / "config.json").mkdir()
    with pytest.raises(ModelFormatError, match="config.json is a directory"):
        seqjit.load(saved)


# -- item 11: files outside the directory ---------------------------------------------------------
def test_weights_linked_from_outside_are_refused(tmp_path, saved):
    outside = tmp_path / "elsewhere.safetensors"
    (saved / "model.safetensors").rename(outside)
    os.symlink(outside, saved / "model.safetensors")
    with pytest.raises(ModelFormatError, match="model.safetensors resolves to .*elsewhere.safetensors, outside the "
                                               "model directory"):
        seqjit.load(saved)
    (saved / "model.safetensors").unlink()
    (saved / "weights").mkdir()
    outside.rename(saved / "weights" / "real.safetensors")
    os.symlink("weights/real.safetensors", saved / "model.safetensors")  # a link inside is fine
    assert seqjit.load(saved).config == CONFIG


def test_hub_cache_layout_is_accepted(tmp_path, saved):
    """huggingface_hub's cache: snapshots/<rev>/<file> are links to ../../blobs/<sha>."""
    blobs, snap = tmp_path / "repo" / "blobs", tmp_path / "repo" / "snapshots" / "abc123"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    for i, name in enumerate(("config.json", "model.safetensors")):
        shutil.copy(saved / name, blobs / f"sha{i}")
        os.symlink(f"../../blobs/sha{i}", snap / name)
    assert seqjit.load(snap).config == CONFIG


def _sharded(tmp_path, weight_map):
    directory = tmp_path / "hf"
    directory.mkdir()
    write_safetensors(directory / "part-1.safetensors", {"model.a": np.ones(2, np.float32)})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return directory


@pytest.mark.parametrize("weight_map, message", [
    ({"model.a": "../outside.safetensors"}, "'../outside.safetensors' names a file outside the model directory"),
    ({"model.a": "/etc/passwd"}, "'/etc/passwd' names a file outside the model directory"),
    ({"model.a": 5}, "'weight_map' must be an object mapping tensor names to shard file names"),
    ([1, 2], "'weight_map' must be an object"),
    ({"model.a": "part-1.safetensors", "model.b": "part-1.safetensors"}, "lists tensor.* no shard holds: model.b"),
    ({"model.a": "missing.safetensors"}, "missing.safetensors does not exist"),
])
def test_shard_index_is_validated(tmp_path, weight_map, message):
    from seqjit.convert.common import read_hf_weights

    write_safetensors(tmp_path / "outside.safetensors", {"model.a": np.ones(2, np.float32)})
    directory = _sharded(tmp_path, weight_map)
    with pytest.raises(ModelFormatError, match=message):
        read_hf_weights(directory)


def test_valid_shard_index_loads(tmp_path):
    from seqjit.convert.common import read_hf_weights

    directory = _sharded(tmp_path, {"model.a": "part-1.safetensors", "model.b": "part-2.safetensors"})
    write_safetensors(directory / "part-2.safetensors", {"model.b": np.full(3, 2.0, np.float32)})
    got = read_hf_weights(directory)
    assert sorted(got) == ["model.a", "model.b"]
    np.testing.assert_array_equal(got["model.b"], [2.0, 2.0, 2.0])


# -- item 12: dtypes NumPy lacks -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["F8_E4M3", "F8_E5M2", "C64", 7])
def test_unsupported_dtype_names_the_tensor(saved, dtype):
    def edit(h):
        h["decoder.layers.0.fc2.bias"]["dtype"] = dtype

    _edit_header(saved / "model.safetensors", edit)
    with pytest.raises(ModelFormatError, match=r"tensor 'decoder.layers.0.fc2.bias' has dtype .*which seqjit cannot "
                                               "read"):
        seqjit.load(saved)


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_16_bit_tensor_where_float32_is_expected_names_the_tensor(saved, fmt):
    """A 16-bit tensor is readable now, but a float32 model's weight must be stored as F32."""
    from seqjit.models.io import read_safetensors

    weights, _ = read_safetensors(saved / "model.safetensors")
    weights["decoder.layers.0.fc2.bias"] = np.zeros(8, np.uint16)
    write_safetensors(saved / "model.safetensors", weights, half_format=fmt)
    with pytest.raises(ModelFormatError, match=f"decoder.layers.0.fc2.bias has dtype {fmt}, expected float32"):
        seqjit.load(saved)


def test_hf_importer_bounds_its_config(tmp_path):
    from seqjit.convert.hf_marian import marian_config

    hf = dict(model_type="marian", vocab_size=11, d_model=8, encoder_layers=1, decoder_layers=1,
              encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
              max_position_embeddings=32, pad_token_id=10, eos_token_id=0, decoder_start_token_id=10)
    cfg = TransformerConfig.from_dict(marian_config(hf, "hf"))
    spec = TransformerModel.weight_spec(cfg)
    rng = np.random.default_rng(0)
    write_safetensors(tmp_path / "model.safetensors",
                      {("model." + k if k != "final_logits_bias" else k): rng.standard_normal(s.shape).astype(s.dtype)
                       for k, s in spec.items()})
    for changes, message in [
        ({"encoder_layers": 10 ** 9}, "'encoder_layers' is 1000000000; seqjit allows at most 1024"),
        ({"encoder_layers": 1e9}, "'encoder_layers' must be int"),
        ({"max_position_embeddings": 10 ** 9}, "'max_positions' is 1000000000; seqjit allows at most 65536"),
        ({"activation_function": ["relu"]}, r"activation_function \['relu'\] is not supported"),
        ({"model_type": {"a": 1}}, "model_type {'a': 1} is not supported"),
        ({"scale_embedding": "false"}, "'scale_embedding' must be true or false"),
    ]:
        (tmp_path / "config.json").write_text(json.dumps({**hf, **changes}))
        start = time.perf_counter()
        with pytest.raises((ModelFormatError, ConfigError), match=message):
            seqjit.from_hf(tmp_path)
        assert time.perf_counter() - start < 1.0
    (tmp_path / "config.json").write_text(json.dumps(hf))
    assert seqjit.from_hf(tmp_path).config == cfg
