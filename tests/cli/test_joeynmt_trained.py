"""Checkpoints written by JoeyNMT's own training (``python -m joeynmt train config.yaml --skip-test``,
in process: ``joeynmt.__main__.main``; its ``TrainManager`` saving ``4.ckpt`` and the ``best.ckpt``
link, the vocabularies and the config copy in ``model_dir``) on a tiny generated corpus, a recurrent
model and a Transformer, converted by ``seqjit convert best.ckpt OUT --from joeynmt --config
config.yaml`` and decoded: the ids must be those of JoeyNMT's own searches (the model built by its
``prediction.prepare`` in test mode and loaded by its ``load_checkpoint``; ``recurrent_greedy`` /
``transformer_greedy``, ``beam_search`` at beam 4 without length penalty) on 200 sources of 1-15
tokens. Marked ``toolkit``.

The configs leave JoeyNMT's defaults except sizes and these: ``scheduling: decaying`` (its default
scheduler, ``plateau``, passes ``verbose`` to torch's ReduceLROnPlateau, gone from torch 2.13), the
Transformer's ``layer_norm: pre`` on both sides (unset, JoeyNMT's encoder layers are pre-norm without
a final norm and its decoder's post-norm; seqjit's Transformer has one placement and refuses that by
name), and a wide initialisation (``init_gain`` 3, normal biases): after four Adam steps the outputs
tell the sources apart.
"""
import numpy as np
import pytest

import seqjit

torch = pytest.importorskip("torch")
yaml = pytest.importorskip("yaml")
pytestmark = pytest.mark.toolkit

N_SOURCES = 200
MAX_LEN = 9
PAD, EOS = 1, 3
_INIT = {"initializer": "xavier_uniform", "init_gain": 3.0, "bias_initializer": "normal", "bias_init_weight": 0.5,
         "embed_initializer": "normal", "embed_init_weight": 1.0}
MODELS = {
    "rnn": {**_INIT, "encoder": {"type": "recurrent", "hidden_size": 16, "embeddings": {"embedding_dim": 8}},
            "decoder": {"type": "recurrent", "hidden_size": 16, "embeddings": {"embedding_dim": 8}}},
    "transformer": {**_INIT, **{side: {"type": "transformer", "num_layers": n, "num_heads": 2, "hidden_size": 16,
                                       "ff_size": 32, "layer_norm": "pre", "embeddings": {"embedding_dim": 16}}
                                for side, n in (("encoder", 2), ("decoder", 1))}},
}


def _config(directory, kind):
    side = {"level": "word", "lowercase": False, "max_length": 30, "voc_min_freq": 1}
    return {"name": kind,
            "data": {"train": str(directory / "train"), "dev": str(directory / "dev"), "dataset_type": "plain",
                     "src": {**side, "lang": "src"}, "trg": {**side, "lang": "trg"}},
            "training": {"model_dir": str(directory / kind), "overwrite": True, "optimizer": "adam",
                         "learning_rate": 0.001, "scheduling": "decaying", "batch_size": 16, "batch_type": "sentence",
                         "epochs": 1, "validation_freq": 4, "logging_freq": 2, "eval_metrics": ["bleu"],
                         "early_stopping_metric": "loss", "use_cuda": False, "random_seed": 3, "keep_best_ckpts": 1,
                         "num_workers": 0},
            "testing": {"beam_size": 1, "max_output_length": MAX_LEN},
            "model": MODELS[kind]}


@pytest.fixture(scope="session")
def joey_model_dirs(tmp_path_factory):
    """{kind: the model_dir JoeyNMT's training filled} (built once a session): 64 training pairs in
    batches of 16, one epoch, validated and saved at step 4."""
    from joeynmt.__main__ import main

    d = tmp_path_factory.mktemp("joey_train")
    rng = np.random.default_rng(0)
    for split, n in (("train", 64), ("dev", 8)):
        for lang, prefix in (("src", "s"), ("trg", "t")):
            rows = [" ".join(f"{prefix}{w}" for w in rng.integers(0, 20, rng.integers(1, 12))) for _ in range(n)]
            (d / f"{split}.{lang}").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = {}
    for kind in MODELS:
        (d / f"{kind}.yaml").write_text(yaml.safe_dump(_config(d, kind)), encoding="utf-8")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("sys.argv", ["joeynmt", "train", str(d / f"{kind}.yaml"), "--skip-test"])
            main()
        out[kind] = d / kind
        assert (out[kind] / "best.ckpt").is_file()
    return out


def joey_search(model_dir, ids, lengths, beam_size):
    """JoeyNMT's own loading and search on one batch: the ids of each source up to the end token."""
    from joeynmt.config import load_config, parse_global_args
    from joeynmt.helpers import load_checkpoint
    from joeynmt.prediction import prepare
    from joeynmt.search import beam_search, recurrent_greedy, transformer_greedy

    args = parse_global_args(load_config(model_dir / "config.yaml"), rank=0, mode="test")
    model, _, _, _ = prepare(args, rank=0, mode="test")
    model.load_state_dict(load_checkpoint(model_dir / "best.ckpt", map_location="cpu")["model_state"])
    model.eval()
    src = torch.tensor(ids)
    mask = (src != PAD).unsqueeze(1)
    with torch.no_grad():
        out, hidden, _, _ = model(return_type="encode", src=src, src_length=torch.tensor(lengths), src_mask=mask)
        if beam_size > 1:
            found = beam_search(model, beam_size, out, hidden, mask, MAX_LEN, alpha=-1)[0]
        else:
            greedy = recurrent_greedy if args.model["encoder"]["type"] == "recurrent" else transformer_greedy
            found = greedy(mask, MAX_LEN, model, out, hidden)[0]
    rows = [[int(t) for t in row] for row in found.numpy()]
    return [r[:r.index(EOS)] if EOS in r else r for r in rows], len(model.src_vocab)


def sources(vocab_size, n=N_SOURCES, seed=1):
    """n sources of 1-15 word ids (no specials), longest first (JoeyNMT's encoder packs a sorted
    batch), padded with its <pad>."""
    rng = np.random.default_rng(seed)
    lengths = np.array(sorted([15, 1, 8] + list(rng.integers(1, 16, n - 3)), reverse=True))
    ids = np.full((n, lengths.max()), PAD, np.int64)
    for b, k in enumerate(lengths):
        ids[b, :k] = rng.integers(4, vocab_size, k)
    return ids, lengths


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.filterwarnings("ignore")
def test_joeynmt_train_checkpoint_decodes_as_joeynmt(cli, joey_model_dirs, tmp_path, kind):
    model_dir = joey_model_dirs[kind]
    code, out, err = cli("convert", model_dir / "best.ckpt", tmp_path / "sj", "--from", "joeynmt", "--config",
                         model_dir / "config.yaml")
    assert code == 0, err
    model = seqjit.load(tmp_path / "sj")
    _, vocab_size = joey_search(model_dir, np.array([[4]]), np.array([1]), 1)
    ids, lengths = sources(vocab_size)
    srcs = [list(ids[b, :k]) for b, k in enumerate(lengths)]
    want, _ = joey_search(model_dir, ids, lengths, 1)
    assert len({tuple(w) for w in want}) >= 20  # the sources are told apart
    assert [r.ids[0] for r in model.generate(srcs, max_length=MAX_LEN, min_length=1)] == want
    want, _ = joey_search(model_dir, ids, lengths, 4)
    assert len({tuple(w) for w in want}) >= 20
    # JoeyNMT's beam_search bans <pad> as well (its transformer_greedy does not; the RNN config records it)
    found = model.generate(srcs, max_length=MAX_LEN, min_length=1, beam_size=4, length_penalty=0.0,
                           suppress_pad_token=True)
    assert [r.ids[0] for r in found] == want
