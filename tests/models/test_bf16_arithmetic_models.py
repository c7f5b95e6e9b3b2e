"""Models with bf16 arithmetic (``seqjit.quantize(model, "bfloat16", arithmetic="bfloat16")``): a tiny
Marian against transformers' model on the same bf16 weights with every ``nn.Linear`` computing as
vdpbf16ps defines it (its input rounded to bfloat16 by torch, exact products, float32 sums), through
the Python and the native replay; against the seqjit model with float32 products on the same weights
(the cost of rounding the activations); the config saved and read back; refusals."""
import json

import numpy as np
import pytest
import torch

import seqjit
from seqjit.errors import ConfigError

from .test_half_models import PAD, _replays, _rounded

TOL = 1e-4


@pytest.fixture(scope="module")
def marian32(tmp_path_factory, make_tiny_marian):
    path = tmp_path_factory.mktemp("marian32")
    make_tiny_marian().save_pretrained(path, safe_serialization=True)
    return seqjit.from_hf(path)


@pytest.fixture(scope="module")
def bf16(marian32):
    return seqjit.quantize(marian32, "bfloat16", arithmetic="bfloat16")


def _bf16_linears(hf):
    """``hf`` (weights already bf16 values) with every nn.Linear's input rounded to bfloat16 by torch."""
    for module in hf.modules():
        if isinstance(module, torch.nn.Linear):
            module.forward = (lambda m: lambda x: torch.nn.functional.linear(
                x.to(torch.bfloat16).float(), m.weight, m.bias))(module)
    return hf


def _reference(make_tiny_marian):
    hf = make_tiny_marian()
    linears = [f"{n}.weight" for n, m in hf.named_modules() if isinstance(m, torch.nn.Linear)]
    return _bf16_linears(_rounded(hf, linears + ["model.shared.weight"], torch.bfloat16))


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    src, tgt = rng.integers(1, PAD, (6, 12)), rng.integers(1, PAD, (6, 9))
    tgt[:, 0] = PAD
    return src, tgt


def _close(got, want, what):
    """Rows (sequences) within TOL but those where a rounding went the other way: a linear's input
    differing from torch's by a float32 unit (summation order) can sit on a bf16 rounding boundary,
    so the two round it one bf16 unit (2^-8) apart, and the sequence drifts by about that; within 2 %
    of the logits' spread then, and at least half the sequences free of it."""
    rows = np.abs(got - want).reshape(len(want), -1).max(axis=1)
    assert np.sum(rows <= TOL + TOL * np.abs(want).max()) >= len(rows) / 2, (what, rows)
    assert rows.max() <= 0.02 * want.std(), (what, rows)


def test_marian_bf16_arithmetic_matches_transformers_computing_so(bf16, make_tiny_marian, marian_generate):
    ref = _reference(make_tiny_marian)
    src, tgt = _batch()
    with torch.inference_mode():
        want = ref(input_ids=torch.tensor(src), decoder_input_ids=torch.tensor(tgt)).logits.numpy()
    rng = np.random.default_rng(1)
    sources = [rng.integers(1, PAD, int(rng.integers(3, 14))).tolist() for _ in range(40)]
    out = marian_generate(ref, sources, num_beams=1, max_new_tokens=12)
    ids = [row[:row.index(0) + 1] if 0 in row else row for row in out[:, 1:].tolist()]
    for replay in _replays(bf16):
        _close(bf16.logits(src, tgt), want, replay)
        _close(bf16.logits_stepwise(src, tgt), want, replay)
        got = [r.ids[0] for r in bf16.generate(sources, max_length=12)]
        assert sum(g == i for g, i in zip(got, ids)) >= 36, replay  # such a drift may change a near tie


def test_the_cost_of_bf16_products(marian32, bf16):
    """Against float32 products on the same bf16 weights: each product moves by at most 2^-9 of
    sum |x_k w_k| (tests/kernels/test_linear_half_bf16.py), and those moves add up through 2 + 2
    layers and the output projection: measured here, logits apart by 2.8 % of their spread at worst
    and 0.47 % on average; asserted within 5 % and 1 %. Greedy outputs mostly the same."""
    wide = seqjit.quantize(marian32, "bfloat16")
    src, tgt = _batch(2)
    a, b = bf16.logits(src, tgt), wide.logits(src, tgt)
    spread = b.std()
    d = np.abs(a - b)
    print(f"\nbf16 products vs float32 products: logits apart by {d.max() / spread:.2%} of their spread at "
          f"worst, {d.mean() / spread:.2%} on average")
    assert 1e-4 * spread < d.max() < 0.05 * spread and d.mean() < 0.01 * spread
    rng = np.random.default_rng(3)
    sources = [rng.integers(1, PAD, int(rng.integers(3, 14))).tolist() for _ in range(40)]
    same = [x.ids[0] == y.ids[0] for x, y in zip(bf16.generate(sources, max_length=12),
                                                 wide.generate(sources, max_length=12))]
    assert sum(same) >= 32, sum(same)


def test_the_graphs_mark_their_products(bf16):
    """Every linear_half of the encoder and decoder graphs computes in bf16."""
    for name in ("encoder", "decoder_step"):
        nodes = [n for n in bf16.executor(name).graph.nodes if n.op == "linear_half"]
        assert nodes and {n.attrs["arith"] for n in nodes} == {"bfloat16"}, name


def test_directory_round_trip(bf16, tmp_path):
    bf16.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["quantization"], config["arithmetic"]) == ("bfloat16", "bfloat16")
    loaded = seqjit.load(tmp_path)
    assert loaded.config.arithmetic == "bfloat16"
    src, tgt = _batch(4)
    np.testing.assert_array_equal(loaded.logits(src, tgt), bf16.logits(src, tgt))


def test_refusals(marian32, bf16, tmp_path):
    with pytest.raises(ValueError, match="arithmetic 'bfloat16' needs scheme 'bfloat16'"):
        seqjit.quantize(marian32, "float16", arithmetic="bfloat16")
    with pytest.raises(ValueError, match="arithmetic 'bfloat16' needs scheme 'bfloat16'"):
        seqjit.quantize(marian32, "int8", arithmetic="bfloat16")
    with pytest.raises(ValueError, match=r"arithmetic must be one of \['float32', 'bfloat16'\], got 'float16'"):
        seqjit.quantize(marian32, "bfloat16", arithmetic="float16")
    with pytest.raises(ValueError, match="already quantized"):
        seqjit.quantize(bf16, "bfloat16", arithmetic="bfloat16")
    marian32.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["arithmetic"] = "bfloat16"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="arithmetic 'bfloat16' needs quantization 'bfloat16', got 'none'"):
        seqjit.load(tmp_path)


def test_rnn_bf16_arithmetic_runs_both_replays():
    """An attention RNN's linear layers compute in bf16 too: the native replay (float32 sums) within
    float32 rounding of the Python one (the reference's float64 sums)."""
    from .test_attention_variants import batch, build

    model = build("general-2-concat-deep")[1]
    q = seqjit.quantize(model, "bfloat16", arithmetic="bfloat16")
    src, lengths, tgt = batch()
    outs = {}
    for replay in _replays(q):
        outs[replay] = q.logits(src, tgt, src_lengths=lengths)
    np.testing.assert_allclose(outs["native"], outs["python"], rtol=TOL, atol=TOL)
