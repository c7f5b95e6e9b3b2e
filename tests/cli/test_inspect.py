"""``seqjit inspect``: architecture, config, parameter count, graphs and memory of a model."""
import json
import re

import numpy as np
import pytest

import seqjit



@pytest.fixture
def gru_dir(helpers, tmp_path):
    ref = helpers.gru_seq2seq(seed=1, src_vocab=11, tgt_vocab=13, emb=6, hidden=8, layers=2)
    model = seqjit.from_torch({k: v.numpy() for k, v in ref.state_dict().items()}, arch="rnn_seq2seq")
    model.save(tmp_path / "gru")
    return ref, tmp_path / "gru"


def test_json_matches_the_pytorch_module(cli, gru_dir):
    ref, directory = gru_dir
    code, out, err = cli("inspect", directory, "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["architecture"] == "rnn_seq2seq"
    assert info["parameters"] == sum(p.numel() for p in ref.parameters())
    assert info["weights"]["bytes"] == 4 * info["parameters"]
    assert info["weights"]["dtypes"] == {"float32": {"parameters": info["parameters"], "bytes": 4 * info["parameters"]}}
    assert info["config"]["hidden_size"] == 8 and info["config"]["num_layers"] == 2 and info["config"]["cell"] == "gru"
    model = seqjit.load(directory)
    for name, graph in (("encoder", "encoder"), ("decoder_step", "decoder_step")):
        ops = [node.op for node in model.executor(graph).graph.nodes]
        assert info["graphs"][name] == {op: ops.count(op) for op in set(ops)}
        assert all(n >= 1 for n in info["graphs"][name].values())
    memory = info["memory"]
    assert memory["max_length"] == 256
    state1 = sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize
                 for s in model.decoder_state_specs(1, 256).values())
    assert memory["batch_1"] == {"decoder_state_bytes": state1, "total_bytes": info["weights"]["bytes"] + state1}
    assert memory["batch_16"]["decoder_state_bytes"] == 16 * state1


def test_text_report(cli, marian):
    _, hf_dir, sj_dir = marian
    code, out, err = cli("inspect", sj_dir)
    assert code == 0, err
    model = seqjit.load(sj_dir)
    params = sum(w.size for w in model.weights.values())
    assert "architecture: transformer" in out
    assert "  d_model" in out and "= 32" in out and re.search(r"\n  activation += silu\n", out)
    assert f"parameters: {params:,}" in out
    assert "encoder graph:" in out and "decoder-step graph:" in out
    assert " linear x " in out and " attention x " in out
    assert "batch  1:" in out and "batch 16:" in out
    # a Hugging Face directory is converted in memory: the same report
    code, out_hf, err = cli("inspect", hf_dir)
    assert code == 0, err
    assert out_hf.split("\n", 1)[1] == out.split("\n", 1)[1]  # all but the model path line


def test_bundled_name_and_errors(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "gru" is not a local path here
    code, out, err = cli("inspect", "gru")  # the bundled G2P model
    assert code == 0, err
    assert "architecture: rnn_seq2seq" in out
    code, _, err = cli("inspect", tmp_path / "nope")
    assert code == 2 and "seqjit: error:" in err and "nope does not exist" in err
    (tmp_path / "empty").mkdir()
    code, _, err = cli("inspect", tmp_path / "empty")
    assert code == 2 and "config.json does not exist" in err
