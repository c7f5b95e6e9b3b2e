"""A toolkit's own files to text translations: ``seqjit convert CHECKPOINT OUT --from joeynmt|opennmt``
on the checkpoint, config and vocabulary files the toolkit writes (JoeyNMT: ``best.ckpt``,
``config.yaml``, ``src_vocab.txt``/``trg_vocab.txt``; OpenNMT-py: ``model.pt`` holding its options and
vocabularies), then ``seqjit translate`` on text, against the toolkit's own pipeline on the same
text: its tokeniser, vocabulary, greedy search and detokeniser. Marked ``toolkit``."""
import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.toolkit

MODELS = Path(__file__).parent.parent / "models"
MAX_LEN = 7


def _module(name):
    spec = importlib.util.spec_from_file_location(name, MODELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lines(words, n=40, seed=3) -> list:
    """Random sentences over ``words`` and one word no vocabulary has (read as <unk>)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words + ["zzz"], rng.integers(1, 8))) for _ in range(n)]


def run_translate(cli, tmp_path, out_dir, text, *options) -> list:
    (tmp_path / "in.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    code, _, err = cli("translate", "--model", out_dir, "--input", tmp_path / "in.txt", "--output",
                       tmp_path / "out.txt", "--max-length", MAX_LEN, *options)
    assert code == 0, err
    return (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("level", ["word", "char"])
def test_joeynmt_files_translate_text(cli, tmp_path, level):
    yaml = pytest.importorskip("yaml")
    tests = _module("test_joeynmt_rnn")
    from joeynmt.search import recurrent_greedy
    from joeynmt.tokenizers import build_tokenizer
    from joeynmt.vocabulary import Vocabulary

    joey, model_cfg, _ = tests.build("gru-bahdanau-bridge-feeding")
    words = [f"s{i}" for i in range(9)] if level == "word" else list("abcdefgh\u2581")
    src_vocab = Vocabulary(words, tests.SPECIALS)
    trg_vocab = Vocabulary([f"t{i}" for i in range(11)] if level == "word" else list("ijklmnopqr\u2581"),
                           tests.SPECIALS)
    ckpt_dir = tmp_path / "joey"
    ckpt_dir.mkdir()
    torch.save({"steps": 1, "model_state": joey.state_dict()}, ckpt_dir / "best.ckpt")
    src_vocab.to_file(ckpt_dir / "src_vocab.txt")
    trg_vocab.to_file(ckpt_dir / "trg_vocab.txt")
    data_cfg = {"src": {"lang": "xx", "level": level, "lowercase": True},
                "trg": {"lang": "yy", "level": level, "lowercase": False}}
    (ckpt_dir / "config.yaml").write_text(yaml.safe_dump({"data": data_cfg, "model": model_cfg}), encoding="utf-8")
    code, out, err = cli("convert", ckpt_dir / "best.ckpt", tmp_path / "sj", "--from", "joeynmt", "--config",
                         ckpt_dir / "config.yaml")
    assert code == 0, err
    assert "reads text with the toolkit's vocabularies" in out
    text = lines(words if level == "word" else ["ab", "cd", "Efg", "h"])
    got = run_translate(cli, tmp_path, tmp_path / "sj", text, "--min-length", 1)  # JoeyNMT's min_output_length

    tokenizer = build_tokenizer(data_cfg)
    tokenizer["xx"].set_vocab(src_vocab)
    tokenizer["yy"].set_vocab(trg_vocab)
    want = []
    for line in text:
        tokens = tokenizer["xx"](tokenizer["xx"].pre_process(line))
        ids, lengths, _ = src_vocab.sentences_to_ids([tokens], bos=False, eos=True)
        ids = np.array(ids)
        out_ids = None
        with torch.no_grad():
            enc, hidden, mask = tests.joey_encode(joey, ids, np.array(lengths))
            out_ids = recurrent_greedy(mask, MAX_LEN, joey, enc, hidden)[0].numpy()
        sentence = trg_vocab.arrays_to_sentences(out_ids, cut_at_eos=True)[0]
        want.append(tokenizer["yy"].post_process(sentence) if sentence else "")
    assert len(set(want)) > 5
    assert got == want


def test_joeynmt_sentencepiece_model_translates_text(cli, tmp_path):
    """JoeyNMT ``level: bpe`` with ``tokenizer_type: sentencepiece``: pieces from the model file the
    config names (copied into the seqjit directory), looked up in the vocab files."""
    spm = pytest.importorskip("sentencepiece")
    yaml = pytest.importorskip("yaml")
    tests = _module("test_joeynmt_rnn")
    from joeynmt.model import build_model
    from joeynmt.search import recurrent_greedy
    from joeynmt.tokenizers import BasicTokenizer, build_tokenizer
    from joeynmt.vocabulary import Vocabulary

    rng = np.random.default_rng(5)
    words = ["alpha", "beta", "gamma", "delta", "alphabet", "betamax", "gammaray"]
    corpus = [" ".join(rng.choice(words, 6)) for _ in range(300)]
    (tmp_path / "corpus.txt").write_text("\n".join(corpus), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "corpus.txt"), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=30, model_type="bpe", bos_id=-1, eos_id=-1, unk_id=0)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    pieces = [sp.id_to_piece(i) for i in range(1, sp.get_piece_size())]
    src_vocab, trg_vocab = Vocabulary(pieces, tests.SPECIALS), Vocabulary(pieces, tests.SPECIALS)
    model_cfg = tests.joey_config("gru", "bahdanau", "bridge")
    torch.manual_seed(0)
    joey = build_model(model_cfg, src_vocab=src_vocab, trg_vocab=trg_vocab).eval()
    ckpt_dir = tmp_path / "joey"
    ckpt_dir.mkdir()
    torch.save({"model_state": joey.state_dict()}, ckpt_dir / "best.ckpt")
    src_vocab.to_file(ckpt_dir / "src_vocab.txt")
    trg_vocab.to_file(ckpt_dir / "trg_vocab.txt")
    side = {"level": "bpe", "tokenizer_type": "sentencepiece", "tokenizer_cfg": {"model_file": str(tmp_path / "sp.model")}}
    data_cfg = {"src": {"lang": "xx", **side}, "trg": {"lang": "yy", **side}}
    (ckpt_dir / "config.yaml").write_text(yaml.safe_dump({"data": data_cfg, "model": model_cfg}), encoding="utf-8")
    # the config names a model outside its directory, which seqjit does not read unless given as --src-spm
    code, out, err = cli("convert", ckpt_dir / "best.ckpt", tmp_path / "sj", "--from", "joeynmt", "--config",
                         ckpt_dir / "config.yaml", "--src-spm", tmp_path / "sp.model", "--tgt-spm", tmp_path / "sp.model")
    assert code == 0, err
    assert (tmp_path / "sj" / "source.spm").read_bytes() == (tmp_path / "sp.model").read_bytes()
    text = [" ".join(rng.choice(words + ["zeta"], rng.integers(1, 5))) for _ in range(40)]
    got = run_translate(cli, tmp_path, tmp_path / "sj", text, "--min-length", 1)
    tokenizer = build_tokenizer(data_cfg)
    # JoeyNMT's SentencePieceTokenizer.set_vocab also calls spm.SetVocabulary, which sentencepiece 0.2
    # no longer has; it would only restrict the pieces to the vocabulary, which holds them all
    BasicTokenizer.set_vocab(tokenizer["xx"], src_vocab)
    BasicTokenizer.set_vocab(tokenizer["yy"], trg_vocab)
    want = []
    for line in text:
        ids, lengths, _ = src_vocab.sentences_to_ids([tokenizer["xx"](tokenizer["xx"].pre_process(line))], bos=False,
                                                     eos=True)
        with torch.no_grad():
            enc, hidden, mask = tests.joey_encode(joey, np.array(ids), np.array(lengths))
            out_ids = recurrent_greedy(mask, MAX_LEN, joey, enc, hidden)[0].numpy()
        sentence = trg_vocab.arrays_to_sentences(out_ids, cut_at_eos=True)[0]
        want.append(tokenizer["yy"].post_process(sentence) if sentence else "")
    assert len(set(want)) > 5
    assert got == want


def test_opennmt_checkpoint_translates_text(cli, tmp_path):
    tests = _module("test_opennmt_rnn")
    from onmt.inputters.inputter import vocabs_to_dict

    onmt_model, opt, _ = tests.build("brnn-lstm-2-general-feed")
    vocabs = tests.vocabularies()
    sd = onmt_model.state_dict()
    torch.save({"model": {k: v for k, v in sd.items() if not k.startswith("generator.")},
                "generator": onmt_model.generator.state_dict(), "vocab": vocabs_to_dict(vocabs),
                "opt": argparse.Namespace(**opt)}, tmp_path / "model.pt")
    code, out, err = cli("convert", tmp_path / "model.pt", tmp_path / "sj", "--from", "opennmt")
    assert code == 0, err
    assert "OpenNMT-py checkpoint" in out and "reads text with the toolkit's vocabularies" in out
    text = lines([f"s{i}" for i in range(9)])
    got = run_translate(cli, tmp_path, tmp_path / "sj", text)
    want = []
    for line in text:
        ids = np.array([vocabs["src"].lookup_token(t) for t in line.split()])[None]
        out_ids = tests.translate(onmt_model, ids, np.array([ids.shape[1]]), 1)[0]
        # OpenNMT-py writes its tokens joined by spaces; seqjit drops <blank> and <s> from text output
        want.append(" ".join(vocabs["tgt"].lookup_index(i) for i in out_ids if i not in (1, 2)))
    assert len(set(want)) > 5
    assert got == want


def test_opennmt_vocab_files_build_as_opennmt_builds_them(tmp_path):
    """``onmt_build_vocab`` files (token<TAB>count) give OpenNMT-py's own ids (inputters.build_vocab),
    with a size cap, a minimum frequency and padding to a multiple."""
    from onmt.inputters.inputter import build_vocab

    from seqjit.convert.toolkit_vocab import opennmt_vocab_file

    (tmp_path / "src.vocab").write_text("".join(f"w{i}\t{50 - i}\n" for i in range(40)), encoding="utf-8")
    opt = dict(src_vocab=str(tmp_path / "src.vocab"), tgt_vocab=None, share_vocab=True, src_vocab_size=30,
               src_words_min_frequency=15, vocab_size_multiple=8, src_feats_vocab=None, data_task="seq2seq",
               default_specials=["<unk>", "<blank>", "<s>", "</s>"], n_src_feats=0,
               decoder_start_token="<s>")  # 3.5: build_vocab reads these
    want = build_vocab(argparse.Namespace(**opt), {"src": [], "tgt": []})["src"].ids_to_tokens
    assert opennmt_vocab_file(tmp_path / "src.vocab", opt, "src") == want


def test_vocabulary_of_another_model_is_refused(cli, tmp_path):
    tests = _module("test_joeynmt_rnn")
    from joeynmt.vocabulary import Vocabulary

    joey, model_cfg, _ = tests.build("gru-bahdanau-bridge-feeding")
    torch.save({"model_state": joey.state_dict()}, tmp_path / "best.ckpt")
    Vocabulary([f"s{i}" for i in range(5)], tests.SPECIALS).to_file(tmp_path / "src_vocab.txt")  # 9 words trained
    Vocabulary([f"t{i}" for i in range(11)], tests.SPECIALS).to_file(tmp_path / "trg_vocab.txt")
    import json

    (tmp_path / "model.json").write_text(json.dumps({"model": model_cfg}))
    code, _, err = cli("convert", tmp_path / "best.ckpt", tmp_path / "sj", "--from", "joeynmt", "--config",
                       tmp_path / "model.json")
    assert code != 0 and "the source vocabulary has 9 tokens but the model's embedding has 13 rows" in err
    assert not (tmp_path / "sj").exists()
