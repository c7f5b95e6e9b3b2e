"""Property-based: malformed model directories (truncations, byte flips, safetensors header edits,
dtype/shape swaps, config mutations, path tricks) give a typed seqjit error or a correct load, within
a time and memory bound; never a raw exception, a hang or a silently wrong model (issue 12).

The oracle is independent of the loader: a load that succeeds must give exactly the weights that
were saved (unless the file no longer carries checksums, which ``seqjit.load`` then says with a
ChecksumWarning), and a config whose every key holds the value written in ``config.json``.
"""
import json
import os
import shutil
import struct
import tempfile
import threading
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import seqjit
from seqjit.errors import ChecksumWarning, ConfigError, ModelFormatError
from seqjit.models.attention_seq2seq import AttentionSeq2SeqConfig, AttentionSeq2SeqModel
from seqjit.models.transformer import TransformerConfig, TransformerModel

TIME_LIMIT_S = 3.0
MEMORY_LIMIT = 32 << 20  # bytes traced by tracemalloc (NumPy reports its buffers to it)
FUZZ = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _saved(model) -> dict:
    """{file name: bytes} of ``model`` saved, plus the original weights and config dict."""
    with tempfile.TemporaryDirectory() as d:
        model.save(d)
        files = {name: (Path(d) / name).read_bytes() for name in ("config.json", "model.safetensors")}
    return dict(files=files, weights={k: v.copy() for k, v in model.weights.items()},
                config=json.loads(files["config.json"]))


def _random_model(cls, config, seed=0):
    rng = np.random.default_rng(seed)
    return cls(config, {k: rng.standard_normal(s.shape).astype(s.dtype) for k, s in cls.weight_spec(config).items()})


TINY_TRANSFORMER = TransformerConfig(src_vocab_size=11, tgt_vocab_size=13, d_model=8, encoder_layers=1,
                                     decoder_layers=1, encoder_heads=2, decoder_heads=2, encoder_ffn_dim=8,
                                     decoder_ffn_dim=8, max_positions=16, final_logits_bias=True)
BASES = {
    "transformer": _saved(_random_model(TransformerModel, TINY_TRANSFORMER)),
    "attention_seq2seq": _saved(_random_model(AttentionSeq2SeqModel, AttentionSeq2SeqConfig(
        src_vocab_size=7, tgt_vocab_size=9, hidden_size=4, attention="bahdanau", attention_dim=4))),
}
#: the same config, other weights: a link to them must not load silently
OTHER = _saved(_random_model(TransformerModel, TINY_TRANSFORMER, seed=1))


def _write(directory: Path, base: dict, config_text=None, weights=None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_bytes(base["files"]["config.json"] if config_text is None else config_text)
    (directory / "model.safetensors").write_bytes(base["files"]["model.safetensors"] if weights is None else weights)


def _split(raw: bytes) -> tuple:
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _join(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _run_bounded(load) -> dict:
    """Run ``load()`` in a thread: no hang, within the time and memory bounds, and any exception a
    typed seqjit error. Returns {"model" or "exc", "unchecked": a ChecksumWarning was issued}."""
    box: dict = {}

    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tracemalloc.start()
            try:
                box["model"] = load()
            except BaseException as exc:  # noqa: BLE001 - judged below
                box["exc"] = exc
            finally:
                box["peak"] = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
        box["unchecked"] = any(issubclass(w.category, ChecksumWarning) for w in caught)

    start = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(TIME_LIMIT_S * 4)
    assert not thread.is_alive(), "the load hangs"
    assert time.perf_counter() - start < TIME_LIMIT_S, f"the load took {time.perf_counter() - start:.1f} s"
    assert box["peak"] < MEMORY_LIMIT, f"the load traced {box['peak']} bytes"
    exc = box.get("exc")
    if exc is not None:
        if not isinstance(exc, (ModelFormatError, ConfigError)):
            raise AssertionError(f"raw {type(exc).__name__} instead of a typed seqjit error") from exc
        assert str(exc), "empty error message"
    return box


def _check_load(directory: Path, base: dict, written_config: dict | None = None) -> str:
    """``seqjit.load(directory)`` gives a typed error or the saved weights with the written config
    (and a model that decodes). Returns "error" or "loaded"."""
    box = _run_bounded(lambda: seqjit.load(directory))
    if "exc" in box:
        return "error"
    model = box["model"]
    assert set(model.weights) == set(base["weights"])
    for name, want in base["weights"].items():
        got = model.weights[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if not box["unchecked"]:
            np.testing.assert_array_equal(got, want, err_msg=f"{name} loaded silently wrong")
    config = written_config if written_config is not None else base["config"]
    for key, value in config.items():
        if key not in ("architecture", "format_version"):
            got = getattr(model.config, key)
            assert got == value and type(got) is type(value), f"config {key}: {got!r} != {value!r}"
    _check_documented_limits(model.config.to_dict())
    _check_decodes(model)
    return "loaded"


def _check_documented_limits(config: dict) -> None:
    """What the README promises a loaded config holds: finite floats, integers within 2**31 - 1,
    at most 1024 layers, at most 65536 positions, 0 < layer_norm_eps <= 1."""
    for key, value in config.items():
        if isinstance(value, float):
            assert np.isfinite(value), f"{key} = {value} loaded"
        if isinstance(value, int) and not isinstance(value, bool):
            assert abs(value) <= 2 ** 31 - 1, f"{key} = {value} loaded"
            if key.endswith("layers"):
                assert value <= 1024, f"{key} = {value} loaded"
    assert config.get("max_positions", 0) <= 65536
    assert 0 < config.get("layer_norm_eps", 1e-5) <= 1


def _check_decodes(model) -> None:
    """A model that loads must run: finite teacher-forced logits for a short batch (a config the
    loader accepts but the model cannot use is a silent failure deferred to decode time)."""
    c = model.config
    src = np.arange(6).reshape(2, 3) % c.src_vocab_size
    tgt = np.full((2, 2), c.decoder_start_id)
    logits = model.logits(src, tgt, [3, 2])
    assert logits.shape == (2, 2, c.tgt_vocab_size) and np.isfinite(logits).all(), "non-finite logits"


def _directory() -> Path:
    return Path(tempfile.mkdtemp(prefix="seqjit-fuzz-"))


ARCH = st.sampled_from(sorted(BASES))


@FUZZ
@given(arch=ARCH, cut=st.floats(0, 1, exclude_max=True), flips=st.lists(
    st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), max_size=3))
def test_truncated_or_flipped_weights(arch, cut, flips):
    base = BASES[arch]
    raw = bytearray(base["files"]["model.safetensors"])
    if flips:
        for where, xor in flips:
            raw[int(where * len(raw))] ^= xor
    else:
        raw = raw[:int(cut * len(raw))]
    d = _directory()
    try:
        _write(d, base, weights=bytes(raw))
        _check_load(d, base)
    finally:
        shutil.rmtree(d)


DTYPES = ["F32", "F64", "F16", "I32", "I64", "U8", "BOOL", "BF16", "F8_E4M3", "F8_E5M2", "C64", "", 5, None]
SHAPES = st.one_of(st.lists(st.integers(-2, 2 ** 64), max_size=4), st.none(), st.text(max_size=3))
CRC_TEXT = st.one_of(st.sampled_from(["5", "[]", "{}", "null", '"x"', "{bad", '{"a": 1}']), st.text(max_size=20))


KINDS = ["dtype", "shape", "swap_names", "swap_shapes", "swap_dtypes", "drop", "offsets", "rename", "no_metadata",
         "no_crc", "crc_text", "metadata_type"]


def _edit(draw, header: dict, data: bytes, kind: str) -> None:
    names = sorted(k for k in header if k != "__metadata__")
    if not names:
        return
    a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
    meta = header.get("__metadata__")
    if kind == "dtype":
        header[a]["dtype"] = draw(st.sampled_from(DTYPES))
    elif kind == "shape":
        header[a]["shape"] = draw(SHAPES)
    elif kind == "swap_names":
        header[a], header[b] = header[b], header[a]
    elif kind in ("swap_shapes", "swap_dtypes"):
        key = kind[5:-1]
        header[a][key], header[b][key] = header[b][key], header[a][key]
    elif kind == "drop":
        del header[a]
    elif kind == "offsets":
        header[a]["data_offsets"] = draw(st.lists(st.integers(-1, len(data) + 8), min_size=0, max_size=3))
    elif kind == "rename":
        header[draw(st.text(min_size=1, max_size=12))] = header.pop(a)
    elif kind == "no_metadata":
        header.pop("__metadata__", None)
    elif kind == "no_crc" and isinstance(meta, dict):
        meta.pop("seqjit.crc32", None)
    elif kind == "crc_text" and isinstance(meta, dict):
        meta["seqjit.crc32"] = draw(CRC_TEXT)
    elif kind == "metadata_type":
        header["__metadata__"] = draw(st.one_of(st.integers(), st.lists(st.text(max_size=2), max_size=2),
                                                st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))


class Edited(tuple):
    """(arch, edited file bytes), shown as the edited header alone when hypothesis reports it."""

    def __repr__(self):
        return f"Edited({self[0]!r}, header={self[2]!r})"


@st.composite
def header_edits(draw):
    """One to three edits of a saved file's header (the data region unchanged)."""
    arch = draw(ARCH)
    header, data = _split(BASES[arch]["files"]["model.safetensors"])
    for kind in draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3)):
        _edit(draw, header, data, kind)
    return Edited((arch, _join(header, data), header))


@FUZZ
@given(edit=header_edits())
def test_safetensors_header_edits(edit):
    arch, raw, _ = edit
    d = _directory()
    try:
        _write(d, BASES[arch], weights=raw)
        _check_load(d, BASES[arch])
    finally:
        shutil.rmtree(d)


#: values that sit on a limit or break one, drawn as often as arbitrary JSON
EDGE_VALUES = st.sampled_from([0, -1, 1, 2, 4, 1025, 65537, 2 ** 31, 10 ** 9, 10 ** 400, 0.5, 2.0, 1e9, float("inf"),
                               float("-inf"), float("nan"), True, None, "8", [4], "gelu", "lstm", "float64"])
ARBITRARY_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=4)


@settings(FUZZ, max_examples=120)
@given(arch=ARCH, data=st.data())
def test_config_mutations(arch, data):
    base = BASES[arch]
    config = dict(base["config"])
    numeric = sorted(k for k, v in config.items() if type(v) in (int, float))
    keys = sorted(config) + ["hidden", "d_modle"]
    for _ in range(data.draw(st.integers(1, 2))):
        key = data.draw(st.sampled_from(numeric) | st.sampled_from(keys))
        if data.draw(st.integers(0, 4)) == 0 and key in config:
            del config[key]
        else:
            config[key] = data.draw(EDGE_VALUES | EDGE_VALUES | ARBITRARY_JSON)
    d = _directory()
    try:
        _write(d, base, config_text=json.dumps(config).encode())
        outcome = _check_load(d, base, written_config=config)
        if outcome == "loaded":  # the keys left out took their defaults; those are checked too
            defaults = seqjit.load(d).config.to_dict()
            assert {k: v for k, v in config.items() if k in defaults} == {k: defaults[k] for k in config if k in defaults}
    finally:
        shutil.rmtree(d)


@FUZZ
@given(arch=ARCH, cut=st.integers(0, 400), junk=st.binary(max_size=40))
def test_config_text_truncated_or_junk(arch, cut, junk):
    base = BASES[arch]
    d = _directory()
    try:
        _write(d, base, config_text=base["files"]["config.json"][:cut] + junk)
        _check_load(d, base)
    finally:
        shutil.rmtree(d)


def _trick(d: Path, outside: Path, name: str) -> None:
    cfg, w = d / "config.json", d / "model.safetensors"
    if name == "weights_link_outside":
        w.unlink()
        os.symlink(outside / "model.safetensors", w)
    elif name == "weights_relative_link_outside":
        w.unlink()
        os.symlink(os.path.relpath(outside / "model.safetensors", d), w)
    elif name == "config_link_outside":
        cfg.unlink()
        os.symlink(outside / "config.json", cfg)
    elif name in ("config_fifo", "weights_fifo"):
        (cfg if name == "config_fifo" else w).unlink()
        os.mkfifo(cfg if name == "config_fifo" else w)
    elif name == "config_dev_zero":
        cfg.unlink()
        os.symlink("/dev/zero", cfg)
    elif name in ("config_dir", "weights_dir"):
        target = cfg if name == "config_dir" else w
        target.unlink()
        target.mkdir()
    elif name == "weights_link_loop":
        w.unlink()
        os.symlink(w.name, w)
    elif name == "weights_dangling":
        w.unlink()
        os.symlink("nowhere.safetensors", w)
    elif name in ("config_missing", "weights_missing"):
        (cfg if name == "config_missing" else w).unlink()
    elif name == "pickle_only":
        w.rename(d / "pytorch_model.bin")
    elif name == "weights_link_inside":
        (d / "sub").mkdir()
        w.rename(d / "sub" / "w.safetensors")
        os.symlink("sub/w.safetensors", w)
    else:
        raise AssertionError(name)


TRICKS = ["weights_link_outside", "weights_relative_link_outside", "config_link_outside", "config_fifo",
          "weights_fifo", "config_dev_zero", "config_dir", "weights_dir", "weights_link_loop", "weights_dangling",
          "config_missing", "weights_missing", "pickle_only", "weights_link_inside"]


@pytest.mark.parametrize("trick", TRICKS)
def test_path_tricks(trick):
    base = BASES["transformer"]
    root = _directory()
    try:
        _write(root / "outside", OTHER)
        _write(root / "model", base)
        _trick(root / "model", root / "outside", trick)
        outcome = _check_load(root / "model", base)
        assert outcome == ("loaded" if trick == "weights_link_inside" else "error")
    finally:
        shutil.rmtree(root)


# -- the Hugging Face importer ----------------------------------------------------------------------
HF_CONFIG = dict(model_type="marian", vocab_size=11, d_model=8, encoder_layers=1, decoder_layers=1,
                 encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=8, decoder_ffn_dim=8,
                 max_position_embeddings=16, pad_token_id=10, eos_token_id=0, decoder_start_token_id=10,
                 activation_function="swish", scale_embedding=True)


def _hf_weights() -> dict:
    from seqjit.convert.hf_marian import marian_config

    spec = TransformerModel.weight_spec(TransformerConfig.from_dict(marian_config(HF_CONFIG, "hf")))
    rng = np.random.default_rng(2)
    return {k: rng.standard_normal(s.shape).astype(s.dtype) for k, s in spec.items()}


HF_WEIGHTS = _hf_weights()
SHARD_NAMES = st.one_of(st.sampled_from(["../outside.safetensors", "/etc/hostname", "sub/../../outside.safetensors",
                                         "", ".", "sub", "missing.safetensors", "part-1.safetensors"]),
                        st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2), st.text(max_size=12))


@FUZZ
@given(data=st.data())
def test_hf_config_and_shard_index_mutations(data):
    from seqjit.models.io import write_safetensors

    config = dict(HF_CONFIG)
    numeric = sorted(k for k, v in config.items() if type(v) is int)
    for _ in range(data.draw(st.integers(0, 2))):
        key = data.draw(st.sampled_from(numeric) | st.sampled_from(sorted(config) + ["share_encoder_decoder_embeddings",
                                                                                      "normalize_before"]))
        config[key] = data.draw(EDGE_VALUES | EDGE_VALUES | ARBITRARY_JSON)
    root = _directory()
    try:
        d = root / "hf"
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        tensors = {("model." + k if k != "final_logits_bias" else k): v for k, v in HF_WEIGHTS.items()}
        names = sorted(tensors)
        write_safetensors(root / "outside.safetensors", tensors)
        if data.draw(st.booleans()):
            write_safetensors(d / "model.safetensors", tensors)
        else:  # sharded, with an index that may point anywhere
            half = len(names) // 2
            write_safetensors(d / "part-1.safetensors", {k: tensors[k] for k in names[:half]})
            write_safetensors(d / "part-2.safetensors", {k: tensors[k] for k in names[half:]})
            weight_map = {k: "part-1.safetensors" if i < half else "part-2.safetensors" for i, k in enumerate(names)}
            for _ in range(data.draw(st.integers(0, 2))):
                weight_map[data.draw(st.sampled_from(names))] = data.draw(SHARD_NAMES)
            index = data.draw(st.sampled_from(["ok", "list", "number"]))
            body = {"ok": {"weight_map": weight_map}, "list": [weight_map], "number": {"weight_map": 5}}[index]
            (d / "model.safetensors.index.json").write_text(json.dumps(body))
        box = _run_bounded(lambda: seqjit.from_hf(d))
        if "model" in box:
            model = box["model"]
            assert set(model.weights) == set(HF_WEIGHTS)
            for name, want in HF_WEIGHTS.items():
                np.testing.assert_array_equal(model.weights[name], want, err_msg=name)
            _check_documented_limits(model.config.to_dict())
            _check_decodes(model)
    finally:
        shutil.rmtree(root)
