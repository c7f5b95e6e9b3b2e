"""Batch inference over Ray Data (``seqjit.integrations.ray``, ``g2p``/``translate --ray``) on a local 2-CPU Ray
cluster started here: outputs equal the single-machine commands', bad lines keep their place, an
actor killed mid-run loses and duplicates nothing, and a missing extra is a one-line error."""
import io
import json
import logging
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

import seqjit
from seqjit.cli import main
from seqjit.commands.ray_run import InOrder
from seqjit.g2p import G2P
from seqjit.g2p.data import load_split
from seqjit.g2p.predictor import MODELS_DIR
from seqjit.integrations.ray import CRASH_FILE_ENV, G2PPredictor, TranslatePredictor, map_g2p, map_translate

N_WORDS = 2100  # two pools of 2048 lines: two Ray blocks, both actors busy


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster for this module; ``cluster`` is the crash-hook file the workers watch
    (set before Ray starts, so every worker inherits it)."""
    crash = tmp_path_factory.mktemp("ray") / "crash-at"
    old = os.environ.get(CRASH_FILE_ENV)
    os.environ[CRASH_FILE_ENV] = str(crash)
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield crash
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop(CRASH_FILE_ENV, None)
        else:
            os.environ[CRASH_FILE_ENV] = old


@pytest.fixture(scope="module")
def words_file(tmp_path_factory):
    """CMUdict test words with bad lines among them: empty, not UTF-8, a tab rule, an unknown
    character, an accent to fold, only a tab."""
    words = [w for w, _ in load_split("test")][:N_WORDS]
    lines = [w.encode() for w in words]
    bad = {5: b"", 17: b"caf\xc3\xa9", 300: b"na\xffve", 2047: "seq\u00dfjit".encode(), 2048: b"hello\tHH AH0 L OW1",
           2080: b"   ", 2090: b"\tonly a tab"}
    for at, line in sorted(bad.items()):
        lines.insert(at, line)
    path = tmp_path_factory.mktemp("words") / "words.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _run(capsys, *argv):
    capsys.readouterr()
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    return status, [line for line in err.splitlines() if line.startswith("seqjit:")]


@pytest.fixture(scope="module")
def single_machine(words_file, tmp_path_factory):
    """``seqjit g2p`` without Ray on ``words_file``: (status, output lines, messages)."""
    out = tmp_path_factory.mktemp("single") / "out.txt"
    done = subprocess.run([sys.executable, "-m", "seqjit", "g2p", "--no-lexicon", "--model", "attention",  # as --ray
                           "--input", str(words_file), "--output", str(out)], capture_output=True, text=True, timeout=300)
    messages = [line for line in done.stderr.splitlines() if line.startswith("seqjit:")]
    return done.returncode, out.read_text(encoding="utf-8").split("\n"), messages


def test_g2p_equals_the_single_machine_command(cluster, words_file, single_machine, tmp_path, capsys):
    out = tmp_path / "out.txt"
    status, messages = _run(capsys, "g2p", "--model", "attention", "--no-lexicon", "--input", words_file, "--output",
                            out, "--ray")
    lines = out.read_text(encoding="utf-8").split("\n")
    assert (status, lines, messages) == single_machine
    assert status == 1 and len(lines) == N_WORDS + 7 + 1 and lines[-1] == ""  # one line per input line
    expected = G2P("attention").predict(["aalborg", "hello"])
    assert lines[0] == f"aalborg\t{' '.join(expected[0].phonemes)}"
    assert lines[2048] == f"hello\t{' '.join(expected[1].phonemes)}"  # read up to the tab
    for at in (5, 300, 2080, 2090):
        assert lines[at] == ""
    assert f"seqjit: {words_file}:6: empty line (no word)" in messages
    assert any(m.startswith(f"seqjit: {words_file}:301: not valid utf-8") for m in messages)
    assert f"seqjit: {words_file}:2091: no word before the tab" in messages
    assert any(m.startswith(f"seqjit: {words_file}:2048: 'seqßjit' has character(s) 'ß'") for m in messages)
    assert lines[17].startswith("café\t") and not any(":18:" in m for m in messages)  # é folded to e


def test_a_killed_actor_loses_and_duplicates_no_line(cluster, words_file, single_machine, tmp_path, capsys):
    cluster.write_text("2070")  # the worker whose batch holds row 2070 (the second block) exits at once
    out = tmp_path / "out.txt"
    status, messages = _run(capsys, "g2p", "--model", "attention", "--no-lexicon", "--input", words_file, "--output", out,
                            "--ray",
                            "--actors", "2")
    fired = cluster.with_name("crash-at.fired")
    assert not cluster.exists() and fired.exists()  # it did fire, once
    fired.unlink()
    assert (status, out.read_text(encoding="utf-8").split("\n"), messages) == single_machine


def test_without_retries_the_killed_actor_fails_the_job(cluster):
    """The hook does kill the worker: with no retry the batch is lost and the job fails loudly."""
    cluster.write_text("3")
    words = ray.data.from_items([{"index": i, "word": w} for i, w in enumerate(["ab", "cd", "ef", "gh"])])
    with pytest.raises(ray.exceptions.RayError):
        map_g2p(words, "gru", actors=1, retries=0).take_all()
    assert cluster.with_name("crash-at.fired").exists()


@pytest.mark.parametrize("lexicon", [[], ["--lexicon", "FILE"]], ids=["cmudict", "file"])
def test_g2p_with_the_dictionary_equals_the_single_machine_command(cluster, tmp_path, capsys, lexicon):
    """--ray consults the dictionary as the command without --ray does (CMUdict by default, or
    --lexicon FILE): the same lines for words the dictionary holds and words it does not."""
    words = [w for w, _ in load_split("test")][:60] + ["seqjit", "zorblax", "read", "Hello,"]
    path = tmp_path / "words.txt"
    path.write_text("\n".join(words) + "\n", encoding="utf-8")
    own = tmp_path / "own.dict"
    own.write_text("zorblax Z AO1 R B L AE0 K S\nseqjit S IY1 K JH IH0 T\n", encoding="utf-8")
    lexicon = [str(own) if a == "FILE" else a for a in lexicon]
    runs = {}
    for name, extra in (("alone", lexicon), ("ray", [*lexicon, "--ray"]), ("model", ["--no-lexicon"])):
        out = tmp_path / f"{name}.txt"
        status, messages = _run(capsys, "g2p", "--model", "gru", "--input", path, "--output", out, *extra)
        runs[name] = (status, out.read_text(encoding="utf-8"), messages)
    assert runs["ray"] == runs["alone"]
    assert runs["alone"][0] == 0 and runs["alone"][1].count("\n") == len(words)
    assert runs["alone"][1] != runs["model"][1]  # the dictionary answered some words


def test_parquet_input(cluster, tmp_path, capsys):
    words = ["hello", None, "world", "seq\njit", "ray"]
    path = tmp_path / "words.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3, 4, 5], "word": words}), path)
    out = tmp_path / "out.txt"
    status, messages = _run(capsys, "g2p", "--model", "gru", "--no-lexicon", "--input", path, "--output", out, "--ray",
                            "--column", "word")
    expected = {p.word: " ".join(p.phonemes) for p in G2P("gru").predict(["hello", "world", "ray"])}
    assert out.read_text(encoding="utf-8").split("\n") == [f"hello\t{expected['hello']}", "",
                                                           f"world\t{expected['world']}", "",
                                                           f"ray\t{expected['ray']}", ""]
    assert status == 1
    assert messages[:2] == [f"seqjit: {path}:2: missing value (null)",
                            f"seqjit: {path}:4: the value holds a line break (one output line per row could not be kept)"]


def test_parquet_needs_a_column_choice(cluster, tmp_path, capsys):
    path = tmp_path / "two.parquet"
    pq.write_table(pa.table({"a": ["x"], "b": ["y"]}), path)
    status = main(["g2p", "--input", str(path), "--output", str(tmp_path / "o"), "--ray"])
    err = capsys.readouterr().err
    assert status == 2 and "has 2 columns (a, b): choose one with --column" in err


# -- translate: token ids and SentencePiece text, on a bundled model's directory --------------------
MODEL = MODELS_DIR / "attention"  # a seqjit model directory: source ids 0-32, end token 2


def _ids_file(path, rng, n=600):
    lines = [" ".join(map(str, rng.integers(4, 33, size=int(rng.integers(1, 12))))) for _ in range(n)]
    lines[3], lines[10], lines[11], lines[400] = "", "5 x 7", "5 99 7", "4 5 6\xff"
    path.write_bytes("\n".join(lines).encode().replace(b"\xc3\xbf", b"\xff") + b"\n")
    return lines


def test_translate_ids_equal_the_single_machine_command(cluster, tmp_path, capsys):
    lines = _ids_file(tmp_path / "in.txt", np.random.default_rng(0))
    status, messages = _run(capsys, "translate", "--model", MODEL, "--input", tmp_path / "in.txt", "--output",
                            tmp_path / "single.txt", "--max-length", 20)
    ray_status, ray_messages = _run(capsys, "translate", "--model", MODEL, "--input", tmp_path / "in.txt",
                                    "--output", tmp_path / "ray.txt", "--max-length", 20, "--ray")
    got = (tmp_path / "ray.txt").read_text().split("\n")
    assert (ray_status, got, ray_messages) == (status, (tmp_path / "single.txt").read_text().split("\n"), messages)
    assert status == 1 and len(got) == len(lines) + 1 and [got[i] for i in (3, 10, 11, 400)] == [""] * 4
    reference = seqjit.load(MODEL).generate([[int(t) for t in lines[0].split()]], max_length=20)[0].ids[0]
    assert got[0] == " ".join(map(str, reference)) and got[0]
    assert [m.split(": ", 2)[1] for m in messages[:4]] == [f"{tmp_path / 'in.txt'}:{n}" for n in (4, 11, 12, 401)]


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    """The attention G2P directory with a character SentencePiece model and a Marian-style
    vocab.json mapping its pieces to source ids 4-32 (end token 2, <unk> 3)."""
    import sentencepiece as spm

    directory = tmp_path_factory.mktemp("text") / "model"
    shutil.copytree(MODEL, directory)
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["the cat sat on a mat", "a dog ran to the sea"] * 8),
                                   model_writer=buffer, vocab_size=20, hard_vocab_limit=False, model_type="char",
                                   character_coverage=1.0, minloglevel=2)
    (directory / "source.spm").write_bytes(buffer.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in ("<unk>", "<s>", "</s>")]
    vocab = {"<pad>": 0, "</s>": 2, "<unk>": 3, **{p: 4 + i for i, p in enumerate(pieces)}}
    assert max(vocab.values()) < 33
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return directory


def test_translate_text_equals_the_single_machine_command(cluster, text_model, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the cat sat\n\na dog\nzebra!\nthe sea\n", encoding="utf-8")
    argv = ("translate", "--model", text_model, "--input", tmp_path / "in.txt", "--max-length", 12)
    status, messages = _run(capsys, *argv, "--output", tmp_path / "single.txt")
    ray_status, ray_messages = _run(capsys, *argv, "--output", tmp_path / "ray.txt", "--ray")
    got = (tmp_path / "ray.txt").read_text(encoding="utf-8").split("\n")
    assert (ray_status, got, ray_messages) == (status, (tmp_path / "single.txt").read_text(encoding="utf-8").split("\n"),
                                               messages)
    assert status == 0 and len(got) == 6 and got[1] == "" and any(got)


def test_parquet_id_lists(cluster, tmp_path, capsys):
    sources = [[5, 6, 7], [8, 9], [], [4, 40]]
    pq.write_table(pa.table({"ids": pa.array(sources, pa.list_(pa.int32()))}), tmp_path / "in.parquet")
    status, messages = _run(capsys, "translate", "--model", MODEL, "--input", tmp_path / "in.parquet", "--output",
                            tmp_path / "out.txt", "--max-length", 10, "--ray")
    model = seqjit.load(MODEL)
    want = [" ".join(map(str, r.ids[0])) for r in model.generate(sources[:2], max_length=10)]
    assert (tmp_path / "out.txt").read_text().split("\n") == [*want, "", "", ""]
    assert status == 1 and len(messages) == 3  # two lines, then the count
    assert "empty line" in messages[0] and "outside the source vocabulary" in messages[1]


# -- translate: text through a Hugging Face tokenizer.json, and a target language ------------------
@pytest.fixture(scope="module")
def nllb_model(tmp_path_factory):
    """A tiny M2M100 directory with an NLLB-style tokenizer.json (language codes eng/deu/fra_Latn)."""
    from ..cli.test_translate_hf_tokenizer import build_tokenizer
    from ..models.conftest import tiny_hf

    path = tmp_path_factory.mktemp("nllb_ray")
    tiny_hf("m2m_100", path, seed=2)
    build_tokenizer(path)
    return path


def test_translate_tokenizer_json_equals_the_single_machine_command(cluster, nllb_model, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the cat sat\n\na dog in the park\nzebra sang!\nder Hund\n", encoding="utf-8")
    outputs = []
    for lang in (None, "deu_Latn", "fra_Latn"):
        argv = ("translate", "--model", nllb_model, "--input", tmp_path / "in.txt", "--max-length", 8,
                *(("--target-lang", lang) if lang else ()))
        status, messages = _run(capsys, *argv, "--output", tmp_path / "single.txt")
        ray_status, ray_messages = _run(capsys, *argv, "--output", tmp_path / "ray.txt", "--ray")
        single = (tmp_path / "single.txt").read_text(encoding="utf-8").split("\n")
        assert (ray_status, (tmp_path / "ray.txt").read_text(encoding="utf-8").split("\n"), ray_messages) == \
            (status, single, messages)
        assert status == 0 and len(single) == 6 and single[1] == "" and any(single)
        outputs.append(single)
    assert outputs[0] != outputs[1] != outputs[2] != outputs[0]  # the target language reached the actors


# -- the library API -----------------------------------------------------------------------------
def test_map_g2p_and_map_translate(cluster):
    words = ["ray", "data", "", "seqjit"]
    table = map_g2p(ray.data.from_items([{"word": w} for w in words]), "gru", actors=1).to_pandas()
    expected = G2P("gru").predict(["ray", "data", "seqjit"])
    assert list(table["phonemes"]) == [" ".join(p.phonemes) for p in expected[:2]] + ["", " ".join(expected[2].phonemes)]
    assert list(table["error"]) == ["", "", "empty line (no word)", ""]
    assert np.allclose(table["score"][[0, 1, 3]], [p.score for p in expected], rtol=1e-5) and math.isnan(table["score"][2])
    rows = map_translate(ray.data.from_items([{"text": "5 6 7"}, {"text": "8 x"}]), MODEL, actors=1,
                         max_length=10).take_all()
    want = seqjit.load(MODEL).generate([[5, 6, 7]], max_length=10, return_scores=True)[0]
    assert list(rows[0]["ids"]) == want.ids[0] and rows[0]["output"] == " ".join(map(str, want.ids[0]))
    assert rows[1]["error"] == "token 2 ('x') is not a token id (plain decimal digits 0-9)" and rows[1]["output"] == ""


def test_predictors_take_any_batch_form_without_ray():
    predictor = G2PPredictor("gru", threads=None)
    expected = [" ".join(p.phonemes) for p in G2P("gru").predict(["ab", "cd"])]
    arrow = predictor(pa.table({"word": ["ab", "cd"], "error": ["", ""]}))
    assert arrow.column("phonemes").to_pylist() == expected
    assert list(predictor({"word": np.array(["ab", "cd"], dtype=object)})["phonemes"]) == expected
    passed = predictor({"word": np.array(["ab", None], dtype=object), "error": np.array(["read error", ""])})
    assert list(passed["error"]) == ["read error", "missing word (null)"] and list(passed["phonemes"]) == ["", ""]
    translated = TranslatePredictor(MODEL, max_length=8, threads=None)({"text": np.array([np.array([5, 6])], dtype=object)})
    assert translated["ids"][0].tolist() == seqjit.load(MODEL).generate([[5, 6]], max_length=8)[0].ids[0]


def test_translate_predictor_target_language(nllb_model):
    """Text through the tokenizer.json, the output language by its code or its token id."""
    from seqjit.text.hf_tokenizer import HFTokenizerCodec

    model = seqjit.from_hf(nllb_model)
    codec = HFTokenizerCodec(nllb_model, model)
    deu = codec.tokenizer.token_to_id("deu_Latn")
    want = model.generate([codec.encode("the cat sat")], max_length=8, forced_bos_id=deu)[0].ids[0]
    assert want[0] == deu
    by_code = TranslatePredictor(nllb_model, max_length=8, threads=None, target_lang="deu_Latn")
    by_id = TranslatePredictor(nllb_model, ids=True, max_length=8, threads=None, forced_bos_id=deu)
    assert list(by_code({"text": np.array(["the cat sat"], dtype=object)})["ids"][0]) == want
    assert list(by_code({"text": np.array(["the cat sat"], dtype=object)})["output"]) == [codec.decode(want)]
    assert list(by_id({"text": np.array([" ".join(map(str, codec.encode("the cat sat")))], dtype=object)})["ids"][0]) == want
    with pytest.raises(ValueError, match="no such language token"):
        TranslatePredictor(nllb_model, threads=None, target_lang="deu_Latm")
    with pytest.raises(ValueError, match="needs a tokenizer.json"):
        TranslatePredictor(MODEL, threads=None, target_lang="deu_Latn")


# -- order, errors, imports ----------------------------------------------------------------------
def test_in_order_drops_repeats_and_reports_gaps():
    order = InOrder(4)
    assert [r["index"] for r in order.add([{"index": 2}, {"index": 0}])] == [0]
    assert [r["index"] for r in order.add([{"index": 1}, {"index": 0}, {"index": 2}])] == [1, 2]
    assert order.repeats == 2
    with pytest.raises(RuntimeError, match="3 of 4 rows"):
        order.finish()
    assert [r["index"] for r in order.add([{"index": 3}])] == [3]
    order.finish()


def test_missing_extra_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "w.txt").write_text("hello\n")
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    for argv in (["g2p", "--input", str(tmp_path / "w.txt"), "--ray"],
                 ["translate", "--model", str(MODEL), "--input", str(tmp_path / "w.txt"), "--ray=auto"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("seqjit: error: --ray needs Ray Data")
        assert "pip install 'seqjit[ray]'" in err


def test_import_seqjit_never_imports_ray():
    code = ("import sys, seqjit, seqjit.cli; seqjit.cli.build_parser(); "
            "assert 'ray' not in sys.modules and 'pyarrow' not in sys.modules, sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
