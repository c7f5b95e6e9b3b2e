"""The examples of README.md and docs/ run as written.

- Every command line in a ```bash block of :data:`CLI_PAGES` that calls ``seqjit`` (or ``python -m
  seqjit``) is split into words by bash itself (quotes, ``$``, comments: what a user's shell does),
  then run by ``seqjit.cli.main`` in a fresh copy of a folder holding the files the examples name;
  it must exit with status 0 and write the ``--output`` or ``OUT`` it names. A line not run here is
  in :data:`NOT_RUN` with the reason, and every entry there must still match a line.
- Every ```python block of :data:`PY_PAGES` runs, page by page in one namespace, in such a folder
  (a block whose first line is ``# not run: why`` is skipped). A top-level expression followed by a
  comment that is a Python literal (``x.phonemes  # ['HH', 'AH0']``) must equal that literal.
"""
from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI_PAGES = ("README.md", "docs/cli.md")
PY_PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))

#: command lines not run here (a prefix of the line), and why
NOT_RUN = {
    "seqjit convert model_dir/best.ckpt": "needs a JoeyNMT checkpoint (tests/cli/test_joeynmt_trained.py, -m toolkit)",
    "seqjit convert model_step_1000.pt": "needs an OpenNMT-py checkpoint (tests/cli/test_opennmt_trained.py, -m toolkit)",
    "seqjit convert model.keras": "needs a Keras model file (tests/models/test_keras_rnn.py, -m toolkit)",
    "seqjit bench": "measures speed for seconds to minutes (tests/cli/test_bad_file_arguments.py runs bench --quick)",
}

_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)
_COMMAND = re.compile(r"^(?:python3? -m )?seqjit(?:\s|$)")
SOURCES = [[12, 7, 9, 3], [5, 3]]  # ids valid in both example models


def blocks(page: str, language: str) -> list[tuple[int, str]]:
    """(line number, text) of each fenced block of ``language`` in ``page``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in _FENCE.finditer(text) if m.group(1) == language]


def cli_examples() -> list[tuple[str, str]]:
    """(page:line, command line) of each distinct example, where it first appears."""
    found: dict[str, str] = {}
    for page in CLI_PAGES:
        for start, block in blocks(page, "bash"):
            for offset, line in enumerate(block.splitlines()):
                if _COMMAND.match(line.strip()):
                    found.setdefault(line.strip(), f"{page}:{start + offset}")
    return [(where, line) for line, where in found.items()]


def shell_words(line: str) -> list[str]:
    """``line`` split into words as bash splits it (no pipes or redirections in an example)."""
    assert not re.search(r"[|<>;&`]", re.sub(r"'[^']*'|#.*$", "", line)), f"not one plain command: {line}"
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {line}"], capture_output=True, check=True).stdout
    words = out.decode().split("\0")[:-1]
    while words[0] in ("python", "python3", "-m"):
        words.pop(0)
    assert words[0] == "seqjit", line
    return words[1:]


def _tiny_state_dict() -> dict:
    """A GRU encoder-decoder with seqjit's rnn_seq2seq names, 16 tokens (PyTorch's layout, seeded)."""
    rng = np.random.default_rng(0)
    vocab, emb, hidden = 16, 8, 12

    def w(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    sd = {"encoder.embedding.weight": w(vocab, emb), "decoder.embedding.weight": w(vocab, emb),
          "decoder.out.weight": w(vocab, hidden), "decoder.out.bias": w(vocab)}
    for side in ("encoder", "decoder"):
        sd |= {f"{side}.gru.weight_ih_l0": w(3 * hidden, emb), f"{side}.gru.weight_hh_l0": w(3 * hidden, hidden),
               f"{side}.gru.bias_ih_l0": w(3 * hidden), f"{side}.gru.bias_hh_l0": w(3 * hidden)}
    return sd


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, make_tiny_marian):
    """The folder the examples run in: my-model/, weights.safetensors, opus-mt-en-de/ (a tiny
    MarianMT saved the Hugging Face way), src.txt, words.txt, my.dict."""
    import seqjit
    from safetensors.numpy import save_file

    root = tmp_path_factory.mktemp("docs_workspace")
    sd = _tiny_state_dict()
    save_file(sd, str(root / "weights.safetensors"))
    seqjit.from_torch(sd, arch="rnn_seq2seq", pad_id=0).save(root / "my-model")
    make_tiny_marian(max_position_embeddings=64).save_pretrained(root / "opus-mt-en-de", safe_serialization=True)
    (root / "src.txt").write_text("".join(" ".join(map(str, s)) + "\n" for s in SOURCES))
    (root / "words.txt").write_text("hello\nworld\n")
    (root / "my.dict").write_text("hello\tHH AH0 L OW1\n")
    return root


@pytest.fixture
def folder(workspace, tmp_path, monkeypatch):
    """A fresh copy of the workspace as the current directory; temp files, caches and threads kept
    inside the test."""
    import seqjit.kernels._threads as threads

    here = tmp_path / "run"
    shutil.copytree(workspace, here)
    path = os.environ.get("PYTHONPATH")
    if path:  # child processes (the attention demo's engines) start in the copy: keep a relative entry valid
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(str(Path(p).resolve()) for p in path.split(os.pathsep) if p))
    monkeypatch.chdir(here)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("SEQJIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEQJIT_KERNEL_CHOICE", "fixed")
    saved = threads._num_threads
    yield here
    threads.set_num_threads(saved)


def _not_run(line: str) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if line.startswith(prefix)), None)


RUN = [(where, line) for where, line in cli_examples() if not _not_run(line)]


@pytest.mark.parametrize("where, line", RUN, ids=[where for where, _ in RUN])
def test_cli_example_runs(where, line, folder, capsys):
    from seqjit.cli import main

    argv = shell_words(line)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's --version and --help
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == 0, f"{where}: `{line}` exited {code}:\n{err[-2000:]}"
    if "--output" in argv:
        written = folder / argv[argv.index("--output") + 1]
        assert written.read_text(), f"{where}: `{line}` wrote nothing to {written.name}"
    elif argv[0] == "convert":
        assert json.loads((folder / [a for a in argv if not a.startswith("-")][2] / "config.json").read_text())
    elif not out.strip():
        pytest.fail(f"{where}: `{line}` printed nothing")


def test_every_not_run_entry_matches_an_example():
    lines = [line for _, line in cli_examples()]
    assert lines, "no command-line examples found"
    stale = [prefix for prefix in NOT_RUN if not any(line.startswith(prefix) for line in lines)]
    assert not stale, f"NOT_RUN entries that match no example any more: {stale}"


def test_python_dash_m_seqjit_runs():
    done = subprocess.run([sys.executable, "-m", "seqjit", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr


def _comments(source: str) -> dict[int, str]:
    return {tok.start[0]: tok.string[1:].strip() for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT}


def _expected(comment: str | None):
    try:
        return True, ast.literal_eval(comment)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def python_pages() -> list[str]:
    return [page for page in PY_PAGES if blocks(page, "python")]


@pytest.mark.parametrize("page", python_pages())
def test_python_examples_run(page, folder, capsys):
    namespace: dict = {"__name__": "__doc_example__"}
    ran = 0
    for start, block in blocks(page, "python"):
        if block.lstrip().startswith("# not run:"):
            continue
        tree = ast.parse(block, filename=page)
        comments = _comments(block)
        for node in tree.body:
            where = f"{page}:{start + node.lineno - 1}"
            has, expected = _expected(comments.get(node.end_lineno)) if isinstance(node, ast.Expr) else (False, None)
            try:
                if has:
                    value = eval(compile(ast.Expression(node.value), where, "eval"), namespace)
                else:
                    exec(compile(ast.Module([node], []), where, "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"{where}: {ast.unparse(node)[:200]} raised {type(exc).__name__}: {exc}")
            if has:
                assert value == expected, f"{where}: {ast.unparse(node)} is {value!r}, the page says {expected!r}"
            ran += 1
    assert ran or page != "README.md", "the README's Python example was not found"


#: pages other branches write (docs/decoding.md, ...), linked before they are merged
LINKED_AHEAD = {"decoding.md", "scoring.md", "half_precision.md", "native_vm.md", "benchmarks.md"}


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of ``page``: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), re.M)}


@pytest.mark.parametrize("page", PY_PAGES)
def test_relative_links_resolve(page):
    path = ROOT / page
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target) if target else path
        if not file.exists():
            if file.name not in LINKED_AHEAD:
                broken.append(link)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(link)
    assert not broken, f"{page}: links to nothing: {broken}"
