"""``seqjit translate`` with a Hugging Face ``tokenizer.json``: a tiny BPE tokenizer built in the test
with the ``tokenizers`` library (NLLB-style: language codes, the source language and end token added
by its post-processor) next to a tiny M2M100; encode/decode against ``transformers``' tokenizer from
the same file, and ``--target-lang`` as the forced first token against ``transformers.generate``."""
import sys

import pytest
import torch

import seqjit

from ..models.conftest import tiny_hf

CORPUS = ["the cat sat on the mat", "a dog ran in the park", "the bird sang a song", "cats and dogs play",
          "le chat est assis", "der Hund lief im Park"] * 4
LANGS = ["eng_Latn", "deu_Latn", "fra_Latn"]
SPECIAL = ["<s>", "<pad>", "</s>", "<unk>"]
MAX_LEN = 8


def build_tokenizer(path):
    """A BPE tokenizer.json of fewer than 96 tokens: <s>=0, <pad>=1, </s>=2, <unk>=3, the language
    codes, then merges; ``eng_Latn $A </s>`` as NLLB encodes a source."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=80, special_tokens=SPECIAL + LANGS, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    eng, eos = tok.token_to_id("eng_Latn"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(single="eng_Latn $A </s>", special_tokens=[("eng_Latn", eng),
                                                                                                  ("</s>", eos)])
    tok.save(str(path / "tokenizer.json"))
    return tok


@pytest.fixture(scope="module")
def nllb(tmp_path_factory):
    """(transformers model, transformers tokenizer, directory) of a tiny M2M100 with a tokenizer.json."""
    from transformers import PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("nllb_text")
    hf = tiny_hf("m2m_100", path, seed=2)
    build_tokenizer(path)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"), bos_token="<s>", eos_token="</s>",
                                  pad_token="<pad>", unk_token="<unk>")
    return hf, tok, path


LINES = ["the cat sat", "a dog in the park", "zebra sang!", "der Hund", "cats play a song on the mat"]


def test_encode_and_decode_equal_transformers_tokenizer(nllb):
    from seqjit.text.hf_tokenizer import HFTokenizerCodec

    _, tok, path = nllb
    codec = HFTokenizerCodec(path, seqjit.from_hf(path))
    encoded = [codec.encode(line) for line in LINES]
    assert encoded == [tok(line)["input_ids"] for line in LINES]
    assert all(ids[0] == tok.convert_tokens_to_ids("eng_Latn") and ids[-1] == 2 for ids in encoded)
    assert any(3 in ids for ids in encoded)  # an unknown character: <unk>
    for ids in encoded + [[5, 6, 7, 2, 1, 40], [tok.convert_tokens_to_ids("deu_Latn"), 9, 10, 2]]:
        assert codec.decode(ids) == tok.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("beam", [1, 4])
def test_translate_with_target_lang_equals_transformers(cli, nllb, tmp_path, beam):
    hf, tok, path = nllb
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", path, "--input", tmp_path / "in.txt", "--max-length", MAX_LEN,
                         "--beam-size", beam, "--target-lang", "deu_Latn")
    assert code == 0, err
    batch = tok(LINES, return_tensors="pt", padding=True)
    with torch.inference_mode():
        ids = hf.generate(**batch, forced_bos_token_id=tok.convert_tokens_to_ids("deu_Latn"), num_beams=beam,
                          max_new_tokens=MAX_LEN, bad_words_ids=[[tok.pad_token_id]], do_sample=False)
    want = tok.batch_decode(ids, skip_special_tokens=True)
    assert out.split("\n")[:-1] == want
    assert any(want)
    code, other, err = cli("translate", "--model", path, "--input", tmp_path / "in.txt", "--max-length", MAX_LEN,
                           "--beam-size", beam, "--target-lang", "fra_Latn", "--format", "json")
    assert code == 0, err
    import json

    assert all(json.loads(line)["ids"][0] == tok.convert_tokens_to_ids("fra_Latn") for line in other.splitlines())


def test_unknown_target_lang_lists_close_matches(cli, nllb, tmp_path):
    _, _, path = nllb
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", path, "--input", tmp_path / "in.txt", "--target-lang", "deu_Latm")
    assert code == 2 and out == ""
    assert 'no such language token' in err and "deu_Latn" in err


def test_target_lang_needs_a_tokenizer_json(cli, nllb, tmp_path):
    _, _, path = nllb
    (tmp_path / "in.txt").write_text("5 6 2\n", encoding="utf-8")
    code, _, err = cli("translate", "--model", path, "--input", tmp_path / "in.txt", "--ids", "--target-lang", "deu_Latn")
    assert code == 2 and "--target-lang needs text read with a tokenizer.json" in err


def test_missing_tokenizers_names_the_extra(cli, nllb, tmp_path, monkeypatch):
    _, _, path = nllb
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import fails
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", path, "--input", tmp_path / "in.txt")
    assert code == 2 and out == ""
    assert "seqjit[hf-tokenizers]" in err and "--ids" in err


def test_a_broken_tokenizer_json_is_named(cli, nllb, tmp_path):
    _, _, path = nllb
    broken = tmp_path / "model"
    broken.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (broken / name).write_bytes((path / name).read_bytes())
    (broken / "tokenizer.json").write_text('{"model": 5}', encoding="utf-8")
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    code, _, err = cli("translate", "--model", broken, "--input", tmp_path / "in.txt")
    assert code == 2 and "tokenizer.json is not a readable tokenizer.json" in err


def test_convert_copies_the_tokenizer_json(cli, nllb, tmp_path):
    """``seqjit convert`` of the directory keeps tokenizer.json: the converted model translates text alike."""
    _, _, path = nllb
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    code, out, err = cli("convert", path, tmp_path / "out")
    assert code == 0, err
    assert "reads text with its tokenizer.json" in out
    runs = [cli("translate", "--model", model, "--input", tmp_path / "in.txt", "--max-length", MAX_LEN,
                "--target-lang", "deu_Latn") for model in (path, tmp_path / "out")]
    assert runs[0][0] == runs[1][0] == 0 and runs[0][1] == runs[1][1]
