"""The attention GRU (G2P "attention": bidirectional GRU encoder, Bahdanau attention, GRU decoder,
linear output), native and Python replays each against float64, one recurrence step at a time, within
a bound derived from float32 arithmetic.

Why not native against Python at a fixed tolerance: the two replays sum in different orders (the
native linear: 4 FMA chains of 16 lanes, tree-summed; the Python replay's Cython kernels: ``omp simd``
reductions as wide as the ISA's vectors, OpenBLAS for the linears), so every step differs by a few
ulp, and the recurrence carries that forward: on an AVX2 host the teacher-forced logits drifted 2.1e-5
apart by the sixth step. A worst-case bound through the whole recurrence (|W| applied step after
step) grows without limit, so each step is checked where its inputs are exact: the float32 state the
path itself stored (the encoder's previous output, the decoder's previous ``h``), the path's own
encoder outputs, and the float32 weights, all exact in float64. Then, to first order in u = 2**-24:

- a sum of n products or terms, in any order, with or without FMA: |err| <= gamma_n * sum|terms|,
  gamma_n = n u / (1 - n u), plus |W| times the error of its inputs (dot_bound);
- tanh, sigmoid and exp within FUNC_ULPS ulp (Eigen's tanh 4.4, Cephes' exp and tanh <= 2, sigmoid
  as 1 / (1 + exp(-x)) or 0.5 + 0.5 tanh(x / 2) within 6); 1 ulp <= 2u|f| (sigmoid: 2u, absolute);
  an input error e moves tanh by (1 - t^2) e and sigmoid by s (1 - s) e;
- the softmax of scores s known within e_s: each exp(s_j - max) within rho_j = e_s_j + u|s_j - max|
  + its ulps relative (the max cancels in the ratio), the sum and division within gamma_L + u. The
  path's attention weights are checked so; its context is then taken from those weights (a sum of L
  products, + 1 rounding should it use their unrounded values), as the path's GRU step reads it.

Each path's value must lie within that bound of the float64 value: per element, per step, on any ISA.
The bound is worst-case (about 1000x the differences seen: the logits' median bound is 3e-3, the
largest difference 3e-6), so it catches a wrong gate, mask, bias or wiring, not an inaccurate kernel:
that is the op tests' part (the reference at 2e-5).
"""
import numpy as np
import pytest

U = 2.0 ** -24
FUNC_ULPS = 8
F = 2 * FUNC_ULPS * U  # a function's error relative to its value


def gamma(n):
    return n * U / (1 - n * U)


def dot_bound(w, x, ex, b=None):
    """Bound of |fl(x @ w.T + b) - (x @ w.T + b)| for x known within ex (w, b exact)."""
    aw = np.abs(w).T
    terms = np.abs(x) @ aw + (0 if b is None else np.abs(b))
    return ex @ aw + gamma(w.shape[1] + (b is not None)) * terms


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru_step(w_ih, w_hh, b_ih, b_hh, x, ex, h):
    """(h', bound) of one PyTorch GRU step (gates r, z, n) from x (within ex) and an exact h."""
    H = h.shape[-1]
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    ti, th = np.abs(x) @ np.abs(w_ih).T + np.abs(b_ih), np.abs(h) @ np.abs(w_hh).T + np.abs(b_hh)
    e_gi = ex @ np.abs(w_ih).T
    # r, z: sigmoid of one sum of K_i + K_h + 2 terms (both products and biases, in any grouping)
    k_rz = w_ih.shape[1] + w_hh.shape[1] + 2
    rz = sigmoid(gi[:, :2 * H] + gh[:, :2 * H])
    e_rz = (e_gi[:, :2 * H] + gamma(k_rz) * (ti[:, :2 * H] + th[:, :2 * H])) * rz * (1 - rz) + F
    r, z, e_r, e_z = rz[:, :H], rz[:, H:], e_rz[:, :H], e_rz[:, H:]
    # n = tanh(W_in x + b_in + r * (W_hn h + b_hn)): the two sums, the product and the add
    ghn = gh[:, 2 * H:]
    pre = gi[:, 2 * H:] + r * ghn
    e_pre = (e_gi[:, 2 * H:] + gamma(w_ih.shape[1] + 1) * ti[:, 2 * H:] + r * gamma(w_hh.shape[1] + 1) * th[:, 2 * H:]
             + e_r * np.abs(ghn) + U * (np.abs(r * ghn) + np.abs(pre)))
    n = np.tanh(pre)
    e_n = e_pre * (1 - n * n) + F * np.abs(n)
    # h' = (1 - z) n + z h (or n + z (h - n)): at most 4 roundings of values <= |n| + |h|
    h1 = (1 - z) * n + z * h
    return h1, (1 - z) * e_n + np.abs(h - n) * e_z + 4 * U * (np.abs(n) + np.abs(h))


def additive_weights(wa, v, h, keys, lengths):
    """(weights, bound) of Bahdanau attention: softmax_j(v . tanh(Wa h + keys_j)) over j < length."""
    qp = h @ wa.T
    e_qp = gamma(wa.shape[1]) * (np.abs(h) @ np.abs(wa).T)
    pre = qp[:, None, :] + keys
    t = np.tanh(pre)
    e_t = (e_qp[:, None, :] + U * np.abs(pre)) * (1 - t * t) + F * np.abs(t)
    s = t @ v
    e_s = e_t @ np.abs(v) + gamma(v.shape[0]) * (np.abs(t) @ np.abs(v))
    visible = np.arange(keys.shape[1])[None, :] < lengths[:, None]
    s = np.where(visible, s, -np.inf)
    top = s.max(axis=1, keepdims=True)
    w = np.exp(s - top)
    w /= w.sum(axis=1, keepdims=True)
    rho = np.where(visible, e_s + U * np.abs(np.where(visible, s - top, 0)) + F, 0)
    return w, w * (rho + rho.max(axis=1, keepdims=True) + gamma(lengths)[:, None] + U)


def within(got, want, bound, what):
    excess = np.abs(got.astype(np.float64) - want) - bound
    i = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess[i] <= 0, (f"{what}: {got[i]} vs {want[i]} (float64) at {i}, |diff| "
                            f"{abs(got[i] - want[i]):.3g} > bound {bound[i]:.3g}")


def check_encoder(w, ids, lens, enc):
    """The path's memory, keys and initial state against one float64 GRU step per position."""
    memory = enc["memory"].astype(np.float64)
    B, S, H2 = memory.shape
    H = H2 // 2
    x = w["encoder.embedding.weight"][ids]
    zero = np.zeros((1, H))
    for b in range(B):
        n = lens[b]
        assert not memory[b, n:].any(), "padded positions of the memory are not 0"
        for sfx, ts, half in (("", range(n), slice(0, H)), ("_reverse", range(n - 1, -1, -1), slice(H, H2))):
            prev = zero
            for t in ts:
                want, bound = gru_step(w[f"encoder.rnn.weight_ih_l0{sfx}"], w[f"encoder.rnn.weight_hh_l0{sfx}"],
                                       w[f"encoder.rnn.bias_ih_l0{sfx}"], w[f"encoder.rnn.bias_hh_l0{sfx}"],
                                       x[b, t][None], np.zeros((1, x.shape[-1])), prev)
                within(memory[b, t, half][None], want, bound, f"encoder{sfx} row {b} position {t}")
                prev = memory[b, t, half][None]
        np.testing.assert_array_equal(enc["init.h.0"][b], np.concatenate([enc["memory"][b, n - 1, :H],
                                                                          enc["memory"][b, 0, H:]]))
    bias = (w["decoder.attention.Ua.bias"] + w["decoder.attention.Wa.bias"]).astype(np.float32)  # as built
    ua = w["decoder.attention.Ua.weight"]
    within(enc["keys"].reshape(B * S, -1), memory.reshape(B * S, -1) @ ua.T + bias,
           dot_bound(ua, memory.reshape(B * S, -1), np.zeros((B * S, H2)), bias.astype(np.float64)), "keys")


def check_decoder_step(w, feeds, logits, weights, h_new, t):
    """One teacher-forced decoder step of the path against float64 from the same (exact) inputs: the
    attention weights, then the GRU from the context of the path's own weights (as its logits are:
    so the weights' bound, wide through the scores' K = 256 + 128 terms, is not carried into them)."""
    h = (feeds["init.h.0"] if t == 0 else feeds["h.0"]).astype(np.float64)
    keys, memory, lengths = feeds["keys"].astype(np.float64), feeds["memory"].astype(np.float64), feeds["src_lengths"]
    want, bound = additive_weights(w["decoder.attention.Wa.weight"], w["decoder.attention.Va.weight"][0], h, keys,
                                   lengths)
    within(weights, want, bound, f"attention weights at step {t}")
    # the context: a sum of L products of the float32 weights (or their unrounded values: +1 rounding)
    ctx = np.einsum("bl,blm->bm", weights.astype(np.float64), memory)
    e_ctx = gamma(lengths + 1)[:, None] * np.einsum("bl,blm->bm", np.abs(weights.astype(np.float64)), np.abs(memory))
    emb = w["decoder.embedding.weight"][feeds["prev_tokens"]]
    x, ex = np.concatenate([emb, ctx], axis=1), np.concatenate([np.zeros_like(emb), e_ctx], axis=1)
    h1, e_h1 = gru_step(w["decoder.rnn.weight_ih_l0"], w["decoder.rnn.weight_hh_l0"], w["decoder.rnn.bias_ih_l0"],
                        w["decoder.rnn.bias_hh_l0"], x, ex, h)
    within(h_new, h1, e_h1, f"decoder h at step {t}")
    wo, bo = w["decoder.out.weight"], w["decoder.out.bias"]
    within(logits, h1 @ wo.T + bo, dot_bound(wo, h1, e_h1, bo), f"logits at step {t}")


@pytest.mark.parametrize("replay", ["native", "python"])
def test_each_step_within_its_float32_rounding_bound(replay):
    from seqjit.decoding.api import pad_sources
    from seqjit.g2p import G2P

    model = G2P("attention").model
    model.set_replay(replay)
    c = model.config
    shape = (c.cell, c.num_layers, c.bidirectional, c.bridge, c.bridge_activation, c.attention, c.query,
             c.input_feeding, c.output_layer, c.deep_output)
    assert shape == ("gru", 1, True, "concat", None, "bahdanau", "previous", False, "linear", False), \
        "the bound is written for this model"
    w = {k: v.astype(np.float64) for k, v in model.weights.items()}
    rng = np.random.default_rng(7)
    words = [list(rng.integers(3, model.source_vocab_size, n)) for n in (4, 11, 7, 1)]
    ids, lens = pad_sources(words, model.pad_id)
    tgt = np.array([[model.decoder_start_id] + list(rng.integers(3, model.target_vocab_size, 6)) for _ in words])
    check_encoder(w, ids, lens, model.encode(ids, lens))
    state = model.start(ids, lens, max_length=tgt.shape[1])
    try:
        for t in range(tgt.shape[1]):
            tokens = tgt[:, t].astype(np.int64)
            feeds = {k: np.array(v, copy=True) for k, v in model.step_feeds(state, tokens).items()}
            logits, weights = model.step(state, tokens, with_attention=True)
            check_decoder_step(w, feeds, logits, weights, state.decoder["h.0"], t)
    finally:
        state.close()
