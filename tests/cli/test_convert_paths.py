"""``seqjit convert``: files named inside a toolkit's checkpoint or config are read only from the
directory of the file naming them (never ``/etc/passwd`` copied into a model because a checkpoint
said so), SentencePiece models must load as one, and nothing is written through a link planted in
the output directory (``--force``). Checkpoints are written with ``torch.save`` (as the toolkits do)
and read by seqjit's restricted unpickler; the refusals come before any weight is converted."""
import argparse
import json
import os

import pytest

import seqjit

torch = pytest.importorskip("torch")

SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]


def opennmt_checkpoint(path, **opt):
    options = argparse.Namespace(transforms=["sentencepiece"], **opt)
    vocab = {"src": SPECIALS + ["a", "b"], "tgt": SPECIALS + ["x", "y"]}
    torch.save({"model": {}, "generator": {}, "opt": options, "vocab": vocab}, path)
    return path


@pytest.fixture
def secret(tmp_path):
    """A file outside the model's directory that must never be read into a converted model."""
    path = tmp_path / "outside" / "secret.model"
    path.parent.mkdir()
    path.write_bytes(b"\n\x0bsecret data")
    return path


@pytest.fixture
def spm_model(tmp_path):
    """A real SentencePiece model's bytes (trained on a few words)."""
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["alpha beta gamma delta", "beta gamma alphabet"] * 50), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=20,
                                   model_type="bpe", bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2)
    return (tmp_path / "sp.model").read_bytes()


def refused(cli, *argv):
    code, _, err = cli("convert", *argv)
    assert code == 2 and err.startswith("seqjit: error: "), (code, err)
    return err


@pytest.mark.parametrize("named", ["absolute", "outside", "dotdot", "link"])
def test_opennmt_subword_model_outside_the_checkpoint_directory_is_refused(cli, tmp_path, secret, named):
    model_dir = tmp_path / "onmt"
    model_dir.mkdir()
    value = {"absolute": "/etc/passwd", "outside": str(secret), "dotdot": "../outside/secret.model",
             "link": "linked.model"}[named]
    if named == "link":
        os.symlink(secret, model_dir / "linked.model")
    ckpt = opennmt_checkpoint(model_dir / "model.pt", src_subword_model=value, tgt_subword_model=value)
    err = refused(cli, ckpt, tmp_path / "out", "--from", "opennmt")
    assert "src_subword_model" in err and "--src-spm" in err and str(model_dir) in err
    assert not (tmp_path / "out").exists()  # nothing written, nothing copied


@pytest.mark.parametrize("key", ["model_file", "voc_file"])
def test_joeynmt_config_naming_a_file_outside_is_refused(cli, tmp_path, secret, key):
    model_dir = tmp_path / "joey"
    model_dir.mkdir()
    torch.save({"model_state": {}}, model_dir / "best.ckpt")
    side = {"level": "bpe", "tokenizer_type": "sentencepiece", "tokenizer_cfg": {"model_file": "sp.model"}}
    if key == "model_file":
        side["tokenizer_cfg"]["model_file"] = str(secret)
        for name in ("src_vocab.txt", "trg_vocab.txt"):
            (model_dir / name).write_text("a\nb\n", encoding="utf-8")
    else:
        side = {"level": "word", "voc_file": "/etc/passwd"}
    config = model_dir / "config.json"
    config.write_text(json.dumps({"data": {"src": side, "trg": side}, "model": {}}), encoding="utf-8")
    err = refused(cli, model_dir / "best.ckpt", tmp_path / "out", "--from", "joeynmt", "--config", config)
    option, flag = {"model_file": ("data.src.tokenizer_cfg.model_file", "--src-spm"),
                    "voc_file": ("data.src.voc_file", "--src-vocab")}[key]
    assert option in err and flag in err
    assert not (tmp_path / "out").exists()


def test_subword_models_are_found_beside_the_checkpoint_and_checked(tmp_path, spm_model):
    """Inside the directory (as named, or by the base name of a path elsewhere) a SentencePiece model
    is read; one that is not a SentencePiece model is refused by name; --src-spm is taken as given."""
    from seqjit.convert.toolkit_vocab import opennmt_vocab
    from seqjit.errors import ModelFormatError

    model_dir = tmp_path / "onmt"
    (model_dir / "sub").mkdir(parents=True)
    (model_dir / "sub" / "src.model").write_bytes(spm_model)
    (model_dir / "tgt.model").write_bytes(spm_model)
    vocab = {"src": SPECIALS + ["a"], "tgt": SPECIALS + ["x"]}
    opt = {"transforms": ["sentencepiece"], "src_subword_model": "sub/src.model",
           "tgt_subword_model": "/training/run/data/tgt.model"}
    words = opennmt_vocab(opt, vocab, base=model_dir)
    assert words["tokenizer"] == "sentencepiece"
    assert words["files"] == {"source.spm": spm_model, "target.spm": spm_model}
    (model_dir / "tgt.model").write_bytes(b"not a sentencepiece model")
    with pytest.raises(ModelFormatError, match=r"option tgt_subword_model .*tgt.model.* not a .*SentencePiece"):
        opennmt_vocab(opt, vocab, base=model_dir)
    given = tmp_path / "elsewhere.model"  # a path the user typed may be anywhere
    given.write_bytes(spm_model)
    words = opennmt_vocab({**opt, "tgt_subword_model": "/etc/passwd"}, vocab, base=model_dir,
                          spm_files=(None, given))
    assert words["files"]["target.spm"] == spm_model


def test_subword_model_check_without_sentencepiece(monkeypatch, spm_model):
    """Without the sentencepiece package a model is still parsed (as a protobuf message) before it is copied."""
    import sys

    from seqjit.convert.spm_check import check_spm_model
    from seqjit.errors import ModelFormatError

    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # import fails: ModuleNotFoundError
    check_spm_model(spm_model, "sp.model")
    for junk in (b"root:x:0:0:root:/root:/bin/bash\n", spm_model[:-3], b"\x08\x01", b"\xff" * 11, b""):
        with pytest.raises(ModelFormatError, match="sp.model"):
            check_spm_model(junk, "sp.model")


def _state_dict(tmp_path, helpers):
    from safetensors.torch import save_file

    path = tmp_path / "gru.safetensors"
    save_file({k: v.contiguous() for k, v in helpers.gru_seq2seq(seed=2).state_dict().items()}, str(path))
    return path


def test_force_replaces_links_planted_in_out(cli, helpers, tmp_path):
    """``--force`` into a directory whose config.json, model.safetensors (and the old fixed temporary
    name) are links to a victim file: the links are replaced, the victim is untouched."""
    path = _state_dict(tmp_path, helpers)
    out = tmp_path / "out"
    out.mkdir()
    victims = {}
    for name in ("config.json", "model.safetensors", "model.safetensors.tmp"):
        victims[name] = tmp_path / f"victim-{name}"
        victims[name].write_bytes(b"precious")
        os.symlink(victims[name], out / name)
    code, _, err = cli("convert", path, out, "--arch", "rnn_seq2seq", "--force")
    assert code == 0, err
    assert all(v.read_bytes() == b"precious" for v in victims.values())
    assert not (out / "config.json").is_symlink() and not (out / "model.safetensors").is_symlink()
    assert seqjit.load(out).arch == "rnn_seq2seq"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]  # none left behind


def test_toolkit_vocabulary_files_replace_planted_links(tmp_path):
    from seqjit.convert.toolkit_vocab import word_vocab, write

    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    for name in ("word_vocab.json", "source.spm"):
        os.symlink(victim, out / name)
    vocab = word_vocab(SPECIALS + ["a"], SPECIALS + ["x"], tokenizer="word", lowercase=False, source_eos=False,
                       unk="<unk>", spm={"source.spm": b"model bytes"})
    assert write(out, vocab, src_vocab_size=5, tgt_vocab_size=5) == ["word_vocab.json", "source.spm"]
    assert victim.read_bytes() == b"precious"
    assert (out / "source.spm").read_bytes() == b"model bytes"
    assert json.loads((out / "word_vocab.json").read_text(encoding="utf-8"))["source"][-1] == "a"

