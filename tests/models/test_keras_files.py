"""The Keras importer's file reading (:mod:`seqjit.convert.keras_files`) is as strict as seqjit's
other readers: HDF5 datasets stored in external files (bytes of any local file) or virtual, soft and
external links (loops included), datasets declaring more bytes than the file holds, unknown filters,
and paths that are FIFOs are refused by name; a fuzz over mutated files raises only typed errors.
The files are written with h5py alone (a Keras 3 legacy ``.h5``: ``model_config`` + ``model_weights``),
so these run in the default CI run; the importer is checked against Keras itself in
``test_keras_rnn.py`` (marked ``toolkit``)."""
import json
import os

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from seqjit.convert import from_keras  # noqa: E402
from seqjit.errors import ConfigError, ModelFormatError  # noqa: E402

from ..hostile_paths import deadline, run_bounded  # noqa: E402

VS, VT, E, H = 7, 9, 4, 5
IDS = dict(decoder_start_id=1, eos_id=2)


def _t(layer, index=0):
    return {"class_name": "__keras_tensor__", "config": {"keras_history": [layer, 0, index]}}


def _layer(cls, name, args=(), kwargs=None, **config):
    nodes = [{"args": list(args), "kwargs": kwargs or {}}] if args else []
    return {"class_name": cls, "name": name, "config": {"name": name, **config}, "inbound_nodes": nodes}


def model_config() -> dict:
    """The Keras tutorials' LSTM encoder-decoder with additive attention, as Keras 3 stores its config."""
    rnn = dict(units=H, return_sequences=True, return_state=True)
    layers = [_layer("InputLayer", "src"), _layer("InputLayer", "tgt"),
              _layer("Embedding", "src_emb", [_t("src")], input_dim=VS, output_dim=E, mask_zero=True),
              _layer("Embedding", "tgt_emb", [_t("tgt")], input_dim=VT, output_dim=E, mask_zero=True),
              _layer("LSTM", "encoder", [_t("src_emb")], **rnn),
              _layer("LSTM", "decoder", [_t("tgt_emb")], {"initial_state": [_t("encoder", 1), _t("encoder", 2)]}, **rnn),
              _layer("AdditiveAttention", "attention", [[_t("decoder"), _t("encoder")]], use_scale=True),
              _layer("Concatenate", "concat", [[_t("decoder"), _t("attention")]], axis=-1),
              _layer("Dense", "out", [_t("concat")], units=VT, activation="softmax")]
    return {"class_name": "Functional", "config": {"name": "m", "layers": layers, "output_layers": [["out", 0, 0]]}}


def weights(seed=0) -> dict:
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.normal(0, 0.5, shape).astype(np.float32)  # noqa: E731
    lstm = lambda: {"kernel": w(E, 4 * H), "recurrent_kernel": w(H, 4 * H), "bias": w(4 * H)}  # noqa: E731
    return {"src_emb": {"embeddings": w(VS, E)}, "tgt_emb": {"embeddings": w(VT, E)}, "encoder": lstm(),
            "decoder": lstm(), "attention": {"scale": w(H)}, "out": {"kernel": w(2 * H, VT), "bias": w(VT)}}


def write_h5(path, change=None):
    """A legacy Keras ``.h5`` model; ``change(f)`` edits the open file before it is closed."""
    with h5py.File(path, "w") as f:
        f.attrs["model_config"] = json.dumps(model_config())
        root = f.create_group("model_weights")
        for layer, arrays in weights().items():
            group = root.create_group(layer)
            group.attrs["weight_names"] = [f"{layer}/{k}" for k in arrays]
            for k, v in arrays.items():
                group[f"{layer}/{k}"] = v
        for layer in ("src", "tgt", "concat"):
            root.create_group(layer).attrs["weight_names"] = np.array([], dtype="S1")
        if change is not None:
            change(f)
    return path


def test_the_handwritten_file_converts(tmp_path):
    """The base file the refusals below start from is a model seqjit imports."""
    model = from_keras(write_h5(tmp_path / "m.h5"), **IDS)
    logits = model.logits(np.array([[3, 4, 5]]), np.array([[1, 3]]), np.array([3]))
    assert logits.shape == (1, 2, VT) and np.isfinite(logits).all()


def test_dataset_in_an_external_file_is_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.full(E * 4 * H, 7.0, np.float32).tobytes())

    def external(f):
        del f["model_weights/encoder/encoder/kernel"]
        f.create_dataset("model_weights/encoder/encoder/kernel", shape=(E, 4 * H), dtype="f4",
                         external=[(str(secret), 0, secret.stat().st_size)])

    with pytest.raises(ModelFormatError, match=r"encoder/kernel stores its data in external files"):
        from_keras(write_h5(tmp_path / "m.h5", external), **IDS)


@pytest.mark.parametrize("kind", ["soft loop", "soft", "external link"])
def test_soft_and_external_links_are_refused(tmp_path, kind):
    def link(f):
        group = f["model_weights/encoder"]
        if kind == "soft loop":
            group["loop"] = h5py.SoftLink("/model_weights/encoder/loop")
        elif kind == "soft":
            del f["model_weights/out/out/bias"]
            f["model_weights/out/out/bias"] = h5py.SoftLink("/model_weights/attention/attention/scale")
        else:
            group["other"] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/x")
        group["self"] = group  # a hard link cycle: visited once, not refused

    expected = "an external link" if kind == "external link" else "a soft link"
    with deadline(30), pytest.raises(ModelFormatError, match=expected):
        from_keras(write_h5(tmp_path / "m.h5", link), **IDS)


def test_virtual_dataset_and_unknown_filter_are_refused(tmp_path):
    write_h5(tmp_path / "source.h5")

    def virtual(f):
        del f["model_weights/attention/attention/scale"]
        layout = h5py.VirtualLayout(shape=(H,), dtype="f4")
        layout[:] = h5py.VirtualSource(str(tmp_path / "source.h5"), "model_weights/attention/attention/scale",
                                       shape=(H,))
        f.create_virtual_dataset("model_weights/attention/attention/scale", layout)

    with pytest.raises(ModelFormatError, match="is a virtual dataset"):
        from_keras(write_h5(tmp_path / "v.h5", virtual), **IDS)

    def scaleoffset(f):
        del f["model_weights/attention/attention/scale"]
        f.create_dataset("model_weights/attention/attention/scale", data=np.ones(H, np.float32), scaleoffset=3)

    with pytest.raises(ModelFormatError, match="uses HDF5 filter 6"):
        from_keras(write_h5(tmp_path / "s.h5", scaleoffset), **IDS)


def test_declared_shape_past_the_file_size_is_refused(tmp_path):
    """100,000 x 100,000 floats declared, nothing written (fill values: 40 GB when read): refused
    before reading, in a child with capped memory so that a regression fails instead of exhausting the host."""
    def bomb(f):
        del f["model_weights/src_emb/src_emb/embeddings"]
        f.create_dataset("model_weights/src_emb/src_emb/embeddings", shape=(100_000, 100_000), dtype="f4",
                         chunks=(1000, 1000))

    path = write_h5(tmp_path / "bomb.h5", bomb)
    assert path.stat().st_size < 1 << 20
    code = (f"from seqjit.convert import from_keras\ntry:\n    from_keras({str(path)!r}, **{IDS!r})\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    done = run_bounded(code, seconds=60, memory=2 << 30)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ModelFormatError") and "declares shape [100000, 100000]" in done.stdout


def test_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "m.h5")
    with deadline(30), pytest.raises(ModelFormatError, match="m.h5 is a FIFO"):
        from_keras(tmp_path / "m.h5", **IDS)


def test_fuzzed_files_raise_only_typed_errors(tmp_path):
    """Bytes of a valid file overwritten, inserted or cut (seeded): each read converts or raises a
    ModelFormatError / ConfigError, within bounded time."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    base = write_h5(tmp_path / "base.h5").read_bytes()
    edits = st.lists(st.tuples(st.sampled_from(["set", "insert", "cut"]), st.integers(0, len(base) - 1),
                               st.binary(min_size=1, max_size=8)), min_size=1, max_size=4)

    @settings(max_examples=int(os.environ.get("SEQJIT_FUZZ_EXAMPLES", 60)), deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(edits)
    def check(changes):
        raw = bytearray(base)
        for how, at, data in changes:
            at = min(at, len(raw) - 1)
            if how == "set":
                raw[at:at + len(data)] = data
            elif how == "insert":
                raw[at:at] = data
            else:
                del raw[at:at + 64 * len(data)]
        path = tmp_path / "fuzz.h5"
        path.write_bytes(bytes(raw))
        try:
            from_keras(path, **IDS)
        except (ModelFormatError, ConfigError):
            pass

    assert hypothesis.__version__
    with deadline(300):
        check()


def test_keras_archive_member_claiming_more_than_compression_gives_is_refused(tmp_path):
    """A ``.keras`` member whose declared size is past what deflate can expand its compressed bytes
    to (a zip bomb, or a size field edited) is refused before it is decompressed."""
    import struct
    import zipfile

    path = tmp_path / "m.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("config.json", json.dumps(model_config()))
        z.writestr("model.weights.h5", write_h5(tmp_path / "w.h5").read_bytes())
    raw = bytearray(path.read_bytes())
    entry = raw.rindex(b"PK\x01\x02")  # the central directory's last entry: model.weights.h5, written last
    compressed = struct.unpack_from("<I", raw, entry + 20)[0]
    struct.pack_into("<I", raw, entry + 24, compressed * 2000)  # the central directory's uncompressed size
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match=r"model.weights.h5 claims \d+ bytes from \d+ compressed"):
        from_keras(path, **IDS)
