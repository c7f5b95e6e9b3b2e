"""``seqjit translate``: ids and text (SentencePiece, Marian layout), batching, bad lines, errors."""
import io
import json
import shutil
import sys

import pytest

import seqjit

MAX_LEN = 12
TEXT = ["the cat sat on the mat", "a dog ran in the park", "the sun is hot today", "we like to read books",
        "she sings a song", "birds fly over the sea", "it rains in the city", "he eats an apple"]


def _expected(model_dir, sources, **options):
    model = seqjit.load(model_dir)
    return [r.ids[0] for r in model.generate(sources, max_length=MAX_LEN, **options)]


def _read_ids(text):
    return [[int(t) for t in line.split()] for line in text.splitlines()]


@pytest.mark.parametrize("batch_tokens", [4096, 16])
def test_ids_equal_generate(cli, marian, helpers, tmp_path, batch_tokens):
    _, _, sj_dir = marian
    sources = helpers.random_sources(14, seed=3)
    helpers.write_lines(tmp_path / "in.txt", sources)
    code, out, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.txt",
                         "--max-length", MAX_LEN, "--max-batch-tokens", batch_tokens, "--quiet")
    assert code == 0, err
    assert out == ""  # stdout stays clean when writing a file
    got = _read_ids((tmp_path / "out.txt").read_text())
    assert got == _expected(sj_dir, sources)
    assert len(got) == len(sources)


def test_beam_search_equals_generate(cli, marian, helpers, tmp_path):
    _, _, sj_dir = marian
    sources = helpers.random_sources(6, seed=4)
    helpers.write_lines(tmp_path / "in.txt", sources)
    code, out, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--beam-size", 3,
                         "--max-length", MAX_LEN, "--max-batch-tokens", 20)
    assert code == 0, err
    assert _read_ids(out) == _expected(sj_dir, sources, beam_size=3)


def test_ids_equal_transformers_greedy(cli, marian, helpers, tmp_path):
    """Not seqjit against itself: transformers' MarianMTModel.generate on the same weights, read
    straight from the Hugging Face directory."""
    hf, hf_dir, _ = marian
    sources = [s + [helpers.EOS] for s in helpers.random_sources(8, seed=5)]  # Marian sources end with </s>
    helpers.write_lines(tmp_path / "in.txt", sources)
    code, out, err = cli("translate", "--model", hf_dir, "--input", tmp_path / "in.txt", "--max-length", MAX_LEN,
                         "--max-batch-tokens", 30)
    assert code == 0, err
    assert _read_ids(out) == helpers.hf_greedy(hf, sources, MAX_LEN)


def test_stdin_to_stdout(cli, marian, helpers):
    _, _, sj_dir = marian
    sources = helpers.random_sources(3, seed=6)
    data = "".join(" ".join(map(str, s)) + "\n" for s in sources).encode()
    code, out, err = cli("translate", "--model", sj_dir, "--max-length", MAX_LEN, stdin=data)
    assert code == 0, err
    assert _read_ids(out) == _expected(sj_dir, sources)


def test_bad_lines_keep_alignment(cli, marian, helpers, tmp_path):
    _, _, sj_dir = marian
    good = helpers.random_sources(3, seed=7)
    lines = [" ".join(map(str, good[0])).encode(), b"4 five 6", b"", b"3 96 2", b"7 \xff\xfe 8",
             " ".join(map(str, good[1])).encode(), b" ".join([b"5"] * 65), b"-1 4", " ".join(map(str, good[2])).encode()]
    path = tmp_path / "in.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, out, err = cli("translate", "--model", sj_dir, "--input", path, "--output", tmp_path / "out.txt",
                         "--max-length", MAX_LEN)
    assert code == 1
    got = (tmp_path / "out.txt").read_text().split("\n")
    assert got[-1] == "" and len(got) - 1 == len(lines)  # one output line per input line
    got = got[:-1]
    expected = _expected(sj_dir, good)
    assert [got[0], got[5], got[8]] == [" ".join(map(str, e)) for e in expected]
    assert all(got[i] == "" for i in (1, 2, 3, 4, 6, 7))
    messages = {}
    prefix = f"seqjit: {path}:"  # one format for every command: seqjit: FILE:LINE: what is wrong
    for line in err.splitlines():
        if line.startswith(prefix):
            number, message = line[len(prefix):].split(": ", 1)
            messages[int(number)] = message
    assert sorted(messages) == [2, 3, 4, 5, 7, 8]
    for number, what in [(2, "('five') is not a token id"), (3, "empty line"), (4, "token id 96"),
                         (5, "not valid utf-8 text"), (7, "more than the model's max_positions (64)"), (8, "('-1') is not a token id")]:
        assert what in messages[number], (number, messages[number])
    assert "seqjit: 6 of 9 line(s)" in err
    assert all(line.startswith("seqjit: ") for line in err.splitlines())


def test_output_written_before_a_failure_is_kept(cli, marian, helpers, tmp_path, monkeypatch):
    """Each line is written and flushed when ready: an interruption loses nothing already out."""
    from seqjit.commands import translate

    _, _, sj_dir = marian
    sources = [[5 + i] * (i + 1) for i in range(6)]  # increasing lengths: batches come in input order
    helpers.write_lines(tmp_path / "in.txt", sources)
    model = seqjit.load(sj_dir)
    calls = []

    def generate(items, **options):
        calls.append(len(items))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return seqjit.models.base.Seq2SeqModel.generate(model, items, **options)

    monkeypatch.setattr(model, "generate", generate)
    monkeypatch.setattr(translate, "load_any", lambda path: model)
    code, _, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.txt",
                       "--max-length", MAX_LEN, "--max-batch-tokens", 6)
    assert code == 130
    got = _read_ids((tmp_path / "out.txt").read_text())
    assert calls[0] == len(got) > 0
    assert got == _expected(sj_dir, sources[:len(got)])


# -- text ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def text_model(marian, tmp_path_factory):
    """The seqjit model plus a SentencePiece model trained here and a Marian-style vocab.json
    covering all 96 model ids: </s> 0, <unk> 1, the pieces, fillers, <pad> 95."""
    import sentencepiece as spm
    _, _, sj_dir = marian
    directory = tmp_path_factory.mktemp("text_model") / "model"
    shutil.copytree(sj_dir, directory)
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXT * 4), model_writer=buffer, vocab_size=60,
                                   hard_vocab_limit=False, character_coverage=1.0, model_type="unigram",
                                   minloglevel=2)
    (directory / "source.spm").write_bytes(buffer.getvalue())
    (directory / "target.spm").write_bytes(buffer.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in ("<unk>", "<s>", "</s>")]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab[piece] = len(vocab)
    while len(vocab) < 95:
        vocab[f"\u2581filler{len(vocab)}"] = len(vocab)
    vocab["<pad>"] = 95
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return directory


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
def test_text_equals_transformers_tokenizer_and_generate(cli, marian, helpers, text_model, tmp_path):
    from transformers import MarianTokenizer

    hf = marian[0]
    tok = MarianTokenizer(source_spm=str(text_model / "source.spm"), target_spm=str(text_model / "target.spm"),
                          vocab=str(text_model / "vocab.json"))
    lines = TEXT[:5] + ["an unseen word: zebra!"]  # z, b, ! never occur in training: <unk>
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", text_model, "--input", tmp_path / "in.txt", "--max-length", MAX_LEN,
                         "--max-batch-tokens", 40)
    assert code == 0, err
    encoded = [tok(line)["input_ids"] for line in lines]
    assert all(ids[-1] == helpers.EOS for ids in encoded) and 1 in encoded[-1]  # </s> appended, <unk> used
    from seqjit.text.translation import TextCodec

    codec = TextCodec(text_model, seqjit.load(text_model))
    assert [codec.encode(line) for line in lines] == encoded
    want = tok.batch_decode(helpers.hf_greedy(hf, encoded, MAX_LEN), skip_special_tokens=True)
    assert out.split("\n")[:-1] == want
    assert any(want)  # the comparison is not trivially between empty lines


def test_text_blank_line_and_ids_flag(cli, text_model, tmp_path):
    (tmp_path / "in.txt").write_text("the cat\n\nthe dog\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", text_model, "--input", tmp_path / "in.txt", "--max-length", 5)
    assert code == 0, err
    assert len(out.split("\n")) == 4 and out.split("\n")[1] == ""
    (tmp_path / "ids.txt").write_text("5 6 0\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", text_model, "--input", tmp_path / "ids.txt", "--max-length", 5, "--ids")
    assert code == 0, err
    assert _read_ids(out) == [r.ids[0] for r in seqjit.load(text_model).generate([[5, 6, 0]], max_length=5)]


def test_missing_sentencepiece_is_a_clear_error(cli, text_model, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # import fails
    (tmp_path / "in.txt").write_text("the cat\n", encoding="utf-8")
    code, out, err = cli("translate", "--model", text_model, "--input", tmp_path / "in.txt")
    assert code == 2 and out == ""
    assert "pip install sentencepiece" in err and "--ids" in err


# -- errors --------------------------------------------------------------------------------------
def test_model_and_input_errors(cli, marian, tmp_path):
    _, _, sj_dir = marian
    (tmp_path / "in.txt").write_text("5 6\n")
    code, _, err = cli("translate", "--model", tmp_path / "nope", "--input", tmp_path / "in.txt")
    assert code == 2 and "seqjit: error:" in err and "nope does not exist" in err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    code, _, err = cli("translate", "--model", bad, "--input", tmp_path / "in.txt")
    assert code == 2 and "config.json is not valid JSON" in err
    code, _, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "missing.txt")
    assert code == 2 and "missing.txt does not exist" in err
    code, _, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--max-length", 100)
    assert code == 2 and "max_positions (64)" in err
    code, _, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--max-batch-tokens", 0)
    assert code == 2 and "--max-batch-tokens must be a positive integer" in err
    code, _, err = cli("translate", "--model", sj_dir, "--input", tmp_path / "in.txt", "--output", tmp_path / "in.txt")
    assert code == 2 and "is the input file" in err and (tmp_path / "in.txt").read_text() == "5 6\n"
    assert not (tmp_path / "out.txt").exists()


def test_rnn_model_and_progress_bar(cli, helpers, tmp_path, monkeypatch):
    """Any seqjit model reads ids; with a terminal on stderr the progress bar runs there, and
    stdout and the output file stay clean."""
    import tqdm  # noqa: F401  (a run-time dependency)
    ref = helpers.gru_seq2seq(seed=4, src_vocab=11, tgt_vocab=13)
    model = seqjit.from_torch({k: v.numpy() for k, v in ref.state_dict().items()}, arch="rnn_seq2seq",
                              pad_id=0, decoder_start_id=1, eos_id=2)
    model.save(tmp_path / "gru")
    sources = [[3, 4, 5], [6], [7, 8, 9, 10, 3], [4, 4]]
    helpers.write_lines(tmp_path / "in.txt", sources[:2] + [[11]] + sources[2:])
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = cli("translate", "--model", tmp_path / "gru", "--input", tmp_path / "in.txt",
                         "--output", tmp_path / "out.txt", "--max-length", 6, "--max-batch-tokens", 5)
    assert code == 1 and out == ""
    assert f"{tmp_path / 'in.txt'}:3: token id 11 (token 1) is outside the source vocabulary [0, 11)" in err
    want = [r.ids[0] for r in model.generate(sources, max_length=6)]
    lines = (tmp_path / "out.txt").read_text().split("\n")
    assert lines == [" ".join(map(str, w)) for w in want[:2]] + [""] + [" ".join(map(str, w)) for w in want[2:]] + [""]
