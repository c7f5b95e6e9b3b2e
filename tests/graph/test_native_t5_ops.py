"""The T5 ops lowered to the native VM (rms_norm, mul, relative_bias, relative_bias_at,
biased_attention) against transformers' own T5 modules and torch, each checked to run as a native
instruction (never a Python callback); and whole T5 plans (encoder, decoder step, full decoder)
lowered with no callback at all."""
import numpy as np
import pytest
import torch

from seqjit.graph import Executor, GraphBuilder

from .test_native_replay import TOL, f32, run_native

rng = np.random.default_rng(11)


@pytest.mark.parametrize("shape", [(1, 32), (3, 5, 48), (2, 7), (4, 768)])
def test_rms_norm_equals_t5_layer_norm(shape, isa):
    from transformers.models.t5.modeling_t5 import T5LayerNorm

    x, w = f32(*shape, scale=3.0), f32(shape[-1])
    norm = T5LayerNorm(shape[-1], eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.from_numpy(w))
        want = norm(torch.from_numpy(x)).numpy()

    def build(g):
        g.output(g.op("rms_norm", g.input("x", dtype="float"), g.constant("w", w), eps=1e-6), name="y")

    np.testing.assert_allclose(run_native(build, {"x": x})["y"], want, **TOL)


@pytest.mark.parametrize("shape", [(1, 64), (3, 5, 37)])
def test_mul(shape, isa):
    a, b = f32(*shape), f32(*shape)

    def build(g):
        g.output(g.op("mul", g.input("a", dtype="float"), g.input("b", dtype="float")), name="y")

    np.testing.assert_array_equal(run_native(build, {"a": a, "b": b})["y"], a * b)


def _t5_attention(decoder, buckets, distance, heads=3):
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = T5Config(d_model=16, d_kv=4, num_heads=heads, relative_attention_num_buckets=buckets,
                      relative_attention_max_distance=distance, is_decoder=decoder)
    attn = T5Attention(config, has_relative_attention_bias=True)
    with torch.no_grad():
        attn.relative_attention_bias.weight.normal_()
    return attn, attn.relative_attention_bias.weight.detach().numpy().copy()


@pytest.mark.parametrize("length", [1, 9, 70])
@pytest.mark.parametrize("buckets,distance", [(32, 128), (16, 20)])
def test_relative_bias_equals_t5_compute_bias(length, buckets, distance):
    attn, table = _t5_attention(False, buckets, distance)
    with torch.no_grad():
        want = attn.compute_bias(length, length).numpy()

    def build(g):
        g.output(g.op("relative_bias", g.constant("t", table), g.input("ids", dtype="int", ndim=2),
                      bidirectional=True, max_distance=distance), name="y")

    np.testing.assert_array_equal(run_native(build, {"ids": np.zeros((2, length), np.int64)})["y"], want)


@pytest.mark.parametrize("buckets,distance", [(32, 128), (16, 20)])
def test_relative_bias_at_each_step_equals_t5_compute_bias(buckets, distance):
    attn, table = _t5_attention(True, buckets, distance)
    m = 60
    cache = np.zeros((2, 3, m, 4), np.float32)

    def build(g):
        g.output(g.op("relative_bias_at", g.constant("t", table), g.input("step", dtype="int", ndim=0),
                      g.input("cache", dtype="float", ndim=4), bidirectional=False, max_distance=distance), name="y")

    g = GraphBuilder("one")
    build(g)
    ex = Executor(g.build(), passes=(), replay="native")
    for step in (0, 1, 7, 25, 59):
        feeds = {"step": np.array(step, np.int64), "cache": cache}
        got = ex.run(feeds)["y"]
        assert all(kind == "native" for _, _, kind in ex.plan_for(feeds).native.low.labels)
        with torch.no_grad():
            want = attn.compute_bias(1, m, past_seen_tokens=step).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"step {step}")
    with pytest.raises(ValueError, match=r"step must lie in \[0, 60\)"):
        ex.run({"step": np.array(60, np.int64), "cache": cache})


def _torch_attention(q, k, v, bias, lengths, causal, scale):
    s = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) * scale + torch.from_numpy(bias)
    lq, lk = s.shape[2], s.shape[3]
    masked = torch.arange(lk)[None, :] >= torch.from_numpy(lengths)[:, None]
    masked = masked[:, None, None, :].expand(-1, 1, lq, lk)
    if causal:
        masked = masked | (torch.arange(lk)[None, :] > torch.arange(lq)[:, None])[None, None]
    p = torch.softmax(s.masked_fill(masked, float("-inf")), dim=-1).nan_to_num(0.0)
    return (p @ torch.from_numpy(v)).numpy()


@pytest.mark.parametrize("causal,lq,lk", [(False, 1, 9), (False, 6, 6), (True, 6, 6), (False, 4, 33)])
@pytest.mark.parametrize("bias_batch", [1, 3])
@pytest.mark.parametrize("scale", [None, 1.0])
def test_biased_attention(causal, lq, lk, bias_batch, scale, isa):
    q, k, v = f32(3, 2, lq, 16), f32(3, 2, lk, 16), f32(3, 2, lk, 8)
    bias = f32(bias_batch, 2, lq, lk, scale=2.0)
    lengths = np.array([lk, 2, 1], np.int64)

    def build(g):
        o = g.op("biased_attention", *(g.input(n, dtype="float") for n in ("q", "k", "v", "bias")),
                 g.input("lengths", dtype="int"), causal=causal, scale=scale)
        g.output(o, name="o")

    out = run_native(build, {"q": q, "k": k, "v": v, "bias": bias, "lengths": lengths})["o"]
    want = _torch_attention(q, k, v, bias, lengths, causal, 1.0 / 4.0 if scale is None else scale)
    np.testing.assert_allclose(out, want, **TOL)


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("kind", ["relu", "gated_gelu"])
def test_t5_plans_lower_with_no_python_callback(kind, int8, tmp_path):
    """Every node of a T5 model's encoder, decoder step and full decoder runs natively (int8: every
    projection quantized, the gated FFN's two input projections included)."""
    import seqjit

    from ..models.test_hf_t5 import KINDS, tiny_t5

    tiny_t5(tmp_path, **KINDS[kind])
    model = seqjit.from_hf(tmp_path)
    if int8:
        model = seqjit.quantize(model, "int8")
        linears = [n for n in model.weights if n.endswith((".fc1.weight", ".fc1_gate.weight", "_proj.weight"))]
        assert all(model.weights[n].dtype == np.int8 for n in linears)
        assert any(".fc1_gate." in n for n in linears) == (kind == "gated_gelu")
    src = np.array([[5, 6, 7, 8, 1], [9, 10, 1, 0, 0]], np.int64)
    lengths = np.array([5, 3], np.int64)
    state = model.start(src, lengths, max_length=6)
    plans = {"decoder_step": model.step_feeds(state, np.zeros(2, np.int64)),
             "encoder": {"src_ids": src, "src_lengths": lengths}}
    cross = {k: v for k, v in plans["decoder_step"].items() if k.startswith("cross_")}
    plans["decoder_full"] = {"tgt_ids": np.zeros((2, 4), np.int64), "src_lengths": lengths, **cross}
    for graph, feeds in plans.items():
        native = model.executor(graph).plan_for(feeds).native_replay(feeds)
        assert native, graph
        python = sorted({op for _, op, how in native.low.labels if how != "native"})
        assert not python, f"{graph}: {python} run as Python callbacks"
