"""Bad sizes and file arguments on the CLI are one-line errors naming the argument, found before any
work is done: an output that is a directory, a benchmark output in a missing directory, an attention
demo too large for the memory."""
import pytest


def _one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("command", [["g2p", "--no-lexicon", "--model", "gru", "hello"],
                                     ["bench", "--quick", "g2p"]], ids=["g2p", "bench"])
def test_an_output_that_is_a_directory(cli, tmp_path, command):
    code, out, err = cli(*command, "--output", tmp_path)
    assert code == 2
    assert _one_error(err) == f"seqjit: error: --output {tmp_path} is a directory, not a file"


def test_a_benchmark_output_in_a_missing_directory_fails_before_the_benchmark(cli, tmp_path, monkeypatch):
    import seqjit.g2p.speed as speed

    monkeypatch.setattr(speed, "measure", lambda **kw: pytest.fail("the benchmark ran before the check"))
    missing = tmp_path / "no" / "table.md"
    code, out, err = cli("bench", "--output", missing, "g2p")
    assert code == 2
    assert _one_error(err) == f"seqjit: error: --output {missing}: the directory {missing.parent} does not exist"
    code, out, err = cli("bench", "--plot", tmp_path, "wer")
    assert code == 2 and _one_error(err) == f"seqjit: error: --plot {tmp_path} is a directory, not a file"


def test_an_attention_demo_too_large_for_the_memory(cli):
    code, out, err = cli("demo", "--kernel", "--length", 10**11)
    assert code == 2
    message = _one_error(err)
    assert message.startswith("seqjit: error: --length 100000000000 --heads 8 --dim 64: naive attention needs")
    assert message.endswith("available now; lower --length")
