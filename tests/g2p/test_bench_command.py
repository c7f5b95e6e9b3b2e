"""``seqjit bench``: the built-in g2p part and the table made from a pytest-benchmark file."""
import pytest

from seqjit.cli import main
from seqjit.commands.bench import find_benchmarks, pytest_table


def test_bench_g2p_quick_writes_a_table_with_both_engines(tmp_path, capsys):
    out = tmp_path / "g2p.md"
    assert main(["bench", "g2p", "--quick", "--output", str(out)]) == 0
    text = out.read_text()
    for title in ("GRU seq2seq", "Bahdanau attention", "Transformer"):
        rows = [line for line in text.splitlines() if line.startswith(f"| {title} |")]
        assert len(rows) == 2  # batch 1 and batch 8
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert float(cells[2]) > 0 and float(cells[3]) > 0 and cells[4].endswith("x")


def test_pytest_table_ranks_each_group(tmp_path):
    bench = tmp_path / "test_bench_tiny.py"
    bench.write_text(
        "import time\n"
        "def test_fast(benchmark):\n    benchmark.group = 'g'\n    benchmark(lambda: None)\n"
        "def test_slow(benchmark):\n    benchmark.group = 'g'\n    benchmark(time.sleep, 0.002)\n")
    table = pytest_table(bench, threads=1).splitlines()
    assert table[2].startswith("| g | test_fast |") and table[2].endswith("| 1.00 |")
    assert table[3].startswith("| g | test_slow |") and float(table[3].split("|")[-2]) > 10


def test_suite_parts_need_a_checkout(tmp_path):
    with pytest.raises(FileNotFoundError, match="--benchmarks DIR"):
        find_benchmarks(str(tmp_path))


def test_markdown_says_why_the_pytorch_column_is_empty():
    from seqjit.g2p.speed import markdown

    rows = [{"model": "gru", "engine": "seqjit", "batch": 1, "words_per_s": 100.0}]
    assert "n/a: PyTorch is not installed" in markdown(rows)
    assert "pip install 'seqjit[bench]'" in markdown(rows)  # the extra pins the torch the peer is measured with
    both = rows + [{"model": "gru", "engine": "pytorch", "batch": 1, "words_per_s": 50.0}]
    assert "not installed" not in markdown(both) and "2.00x" in markdown(both)
