"""``model.score(sources, targets)`` against independent references: transformers' teacher-forced
log-softmax (Marian, BART, T5), CTranslate2's ``score_batch`` (a random Marian converted with its
converter), the PyTorch modules of an RNN and an attention RNN, and a PyTorch simulation of int8;
batched with ragged lengths, each batch size giving the same results; bad input refused by name."""
import numpy as np
import pytest
import torch

import seqjit
from seqjit.convert import from_torch

from ..models.conftest import tiny_hf
from ..models.test_attention_seq2seq import Tutorial as AttentionTutorial
from ..models.test_hf_t5 import tiny_t5
from ..models.test_quantized import _simulated_int8
from ..models.test_rnn_seq2seq import Plain

TOL = 1e-4
PAD, EOS = 95, 0  # the tiny Marian's (conftest._tiny_marian)


def _pairs(n, seed, src_vocab, tgt_vocab, low=2, high=None, empty_target=True):
    """``n`` ragged sources (1..11 ids in [low, src_vocab)) and targets (0..9 ids in [low, tgt_vocab)),
    the first target empty when ``empty_target``."""
    rng = np.random.default_rng(seed)
    sources = [rng.integers(low, high or src_vocab, size=int(rng.integers(1, 12))).tolist() for _ in range(n)]
    targets = [rng.integers(low, high or tgt_vocab, size=int(rng.integers(0, 10))).tolist() for _ in range(n)]
    if empty_target:
        targets[0] = []
    return sources, targets


def _hf_reference(hf, sources, targets, start, eos, pad):
    """transformers, each pair alone: a forward with decoder_input_ids = start + target, the
    log-softmax gathered at target + eos."""
    out = []
    for s, t in zip(sources, targets):
        with torch.no_grad():
            logits = hf(input_ids=torch.tensor([s]), attention_mask=torch.ones(1, len(s), dtype=torch.long),
                        decoder_input_ids=torch.tensor([[start] + t])).logits[0]
        lp = torch.log_softmax(logits.double(), dim=-1)
        out.append(lp[torch.arange(len(t) + 1), torch.tensor(t + [eos])].numpy())
    return out


def _check(results, targets, eos, want):
    """ids = target + eos, sum = score, and the log-probabilities within TOL of ``want``; the worst gap."""
    worst = 0.0
    for r, t, w in zip(results, targets, want):
        assert r.ids == list(t) + [eos]
        assert len(r.log_probs) == len(w) and all(isinstance(x, float) for x in r.log_probs)
        assert r.score == pytest.approx(float(np.sum(np.float32(r.log_probs), dtype=np.float64)), abs=1e-6)
        worst = max(worst, float(np.abs(np.array(r.log_probs) - w).max()))
    assert worst <= TOL, f"max |log-prob difference| {worst:.2e}"
    return worst


@pytest.fixture(scope="module")
def marian(make_tiny_marian, tmp_path_factory):
    """(transformers Marian, seqjit model, directory) whose pad row is zero and pad logit -1e4, as
    CTranslate2's Marian (zero start embedding, no pad in its vocabulary) reads the same model."""
    hf = make_tiny_marian(seed=3)
    with torch.no_grad():
        hf.model.shared.weight[PAD].zero_()
        hf.final_logits_bias[0, PAD] = -1e4
    path = tmp_path_factory.mktemp("marian_score")
    hf.save_pretrained(path / "hf", safe_serialization=True)
    return hf, seqjit.from_hf(path / "hf"), path


@pytest.mark.parametrize("max_batch_size", [64, 3])
def test_marian_equals_transformers(marian, max_batch_size):
    hf, model, _ = marian
    sources, targets = _pairs(12, seed=1, src_vocab=PAD, tgt_vocab=PAD)
    want = _hf_reference(hf, sources, targets, start=PAD, eos=EOS, pad=PAD)
    worst = _check(model.score(sources, targets, max_batch_size=max_batch_size), targets, EOS, want)
    print(f"\nMarian score vs transformers (max_batch_size {max_batch_size}): max |diff| {worst:.2e}")


def test_python_replay_equals_transformers(marian):
    """The reference replay of the same plans (the specification of the native kernels) scores the same."""
    hf, model, _ = marian
    sources, targets = _pairs(4, seed=2, src_vocab=PAD, tgt_vocab=PAD)
    want = _hf_reference(hf, sources, targets, start=PAD, eos=EOS, pad=PAD)
    model.set_replay("python")
    try:
        _check(model.score(sources, targets), targets, EOS, want)
    finally:
        model.set_replay(None)


@pytest.mark.parametrize("family", ["bart", "m2m_100"])
def test_hf_families_equal_transformers(family, tmp_path):
    hf = tiny_hf(family, tmp_path)
    model = seqjit.from_hf(tmp_path)
    sources, targets = _pairs(8, seed=4, src_vocab=96, tgt_vocab=96, low=4)
    want = _hf_reference(hf, sources, targets, start=model.decoder_start_id, eos=model.eos_id, pad=model.pad_id)
    worst = _check(model.score(sources, targets), targets, model.eos_id, want)
    print(f"\n{family} score vs transformers: max |diff| {worst:.2e}")


def test_t5_equals_transformers(tmp_path):
    hf = tiny_t5(tmp_path)
    model = seqjit.from_hf(tmp_path)
    sources, targets = _pairs(8, seed=5, src_vocab=96, tgt_vocab=96, low=2)
    want = _hf_reference(hf, sources, targets, start=model.decoder_start_id, eos=model.eos_id, pad=model.pad_id)
    worst = _check(model.score(sources, targets), targets, model.eos_id, want)
    print(f"\nT5 score vs transformers: max |diff| {worst:.2e}")


class _StubTokenizer:
    """What CTranslate2's Marian loader reads from a tokenizer: id i -> "t{i}", 0 "</s>", 1 "<unk>",
    95 "<pad>" (which the loader drops from the vocabulary)."""

    eos_token, unk_token, pad_token, bos_token = "</s>", "<unk>", "<pad>", None
    special_tokens_map: dict = {}

    def get_vocab(self) -> dict:
        return {_name(i): i for i in range(96)}


def _name(i: int) -> str:
    return {EOS: "</s>", 1: "<unk>", PAD: "<pad>"}.get(i, f"t{i}")


def test_marian_equals_ctranslate2_score_batch(marian):
    import ctranslate2  # the test extra's
    from ctranslate2.converters import TransformersConverter

    class Converter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return _StubTokenizer()

    _, model, path = marian
    Converter(str(path / "hf")).convert(str(path / "ct2"), quantization="float32", force=True)
    translator = ctranslate2.Translator(str(path / "ct2"), device="cpu", compute_type="float32", intra_threads=1)
    sources, targets = _pairs(16, seed=6, src_vocab=PAD, tgt_vocab=PAD)
    sources = [s + [EOS] for s in sources]
    theirs = translator.score_batch([[_name(i) for i in s] for s in sources], [[_name(i) for i in t] for t in targets])
    ours = model.score(sources, targets, max_batch_size=5)
    assert [r.tokens for r in theirs] == [[_name(i) for i in r.ids] for r in ours]
    worst = _check(ours, targets, EOS, [np.array(r.log_probs) for r in theirs])
    print(f"\nMarian score vs CTranslate2 score_batch: max |diff| {worst:.2e}")


def test_int8_marian_equals_torch_simulation(make_tiny_marian, tmp_path):
    """int8 (per-row weights and inputs) against the PyTorch simulation of the scheme on the same weights."""
    hf = make_tiny_marian(seed=3)
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = seqjit.quantize(seqjit.from_hf(tmp_path), "int8")
    sources, targets = _pairs(8, seed=7, src_vocab=PAD, tgt_vocab=PAD)
    want = _hf_reference(_simulated_int8(hf), sources, targets, start=PAD, eos=EOS, pad=PAD)
    worst = _check(model.score(sources, targets), targets, EOS, want)
    print(f"\nint8 Marian score vs its PyTorch simulation: max |diff| {worst:.2e}")


# -- RNN models against their PyTorch modules ---------------------------------------------------------
VS, VT, RNN_EOS, RNN_START = 11, 13, 2, 1  # the test modules' vocabularies; RNN configs' default ids


def _rnn_pairs(n, seed):
    return _pairs(n, seed, src_vocab=VS, tgt_vocab=VT, low=0)


def test_rnn_seq2seq_equals_pytorch():
    """A 2-layer LSTM encoder-decoder (full-sequence decoder path) against its PyTorch module."""
    torch.manual_seed(1)
    ref = Plain(cell="lstm", layers=2).eval()
    model = from_torch(ref.state_dict(), arch="rnn_seq2seq")
    assert model.has_full_decoder()
    sources, targets = _rnn_pairs(6, seed=8)
    want = []
    for s, t in zip(sources, targets):
        with torch.no_grad():
            logits = ref(torch.tensor([s]), torch.tensor([len(s)]), torch.tensor([[RNN_START] + t]))[0]
        lp = torch.log_softmax(logits.double(), dim=-1)
        want.append(lp[torch.arange(len(t) + 1), torch.tensor(t + [RNN_EOS])].numpy())
    worst = _check(model.score(sources, targets, max_batch_size=4), targets, RNN_EOS, want)
    print(f"\nLSTM seq2seq score vs PyTorch: max |diff| {worst:.2e}")


@pytest.mark.parametrize("replay", ["native", "python"])
def test_attention_rnn_equals_pytorch(replay, monkeypatch):
    """The PyTorch tutorial's Bahdanau GRU (no full-sequence decoder: the step path; natively the
    lowered step program run per position, in Python ``model.step``) against its modules,
    teacher-forced with ``target_tensor``; its decoder returns log-softmax outputs."""
    from seqjit.decoding import scoring

    torch.manual_seed(2)
    ref = AttentionTutorial(hidden=8).eval()
    model = from_torch(ref.state_dict(), arch="attention_seq2seq", output_log_softmax=True,
                       decoder_start_id=RNN_START)
    model.set_replay(replay)
    assert not model.has_full_decoder()
    ran = []
    native_steps = scoring._run_native_steps
    monkeypatch.setattr(scoring, "_run_native_steps", lambda *args: ran.append(native_steps(*args)) or ran[-1])
    sources, targets = _rnn_pairs(6, seed=9)
    targets = [t[:4] for t in targets]  # the tutorial decodes MAX_LENGTH = 5 positions: target + end
    targets[1] = [5, 6, 7, 8]
    want = []
    for s, t in zip(sources, targets):
        padded = t + [RNN_EOS] * (5 - len(t))  # the tutorial always runs 5 positions; the first len(t) + 1 are scored
        with torch.no_grad():
            out, hidden = ref.encoder(torch.tensor([s]))
            log_probs, _, _ = ref.decoder(out, hidden, torch.tensor([padded]))
        want.append(log_probs[0].double()[torch.arange(len(t) + 1), torch.tensor(t + [RNN_EOS])].numpy())
    worst = _check(model.score(sources, targets, max_batch_size=4), targets, RNN_EOS, want)
    assert ran == [replay == "native"] * 2  # two batches, each on the path its replay allows
    print(f"\nBahdanau attention RNN score vs PyTorch ({replay}): max |diff| {worst:.2e}")


# -- bad input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sources, targets, error, match", [
    ([[3, 4]], [[3], [4]], ValueError, r"targets must hold one sequence per source: got 2 targets for 1 sources"),
    ([[3, 4], [5]], [[3], [4, 96]], ValueError, r"targets\[1\] holds token id 96, outside the target vocabulary \[0, 96\)"),
    ([[3, 4], [5]], [[3], [-1]], ValueError, r"targets\[1\] holds token id -1"),
    ([[3, 4], [5, 99]], [[3], [4]], ValueError, r"sources\[1\] holds token id 99, outside the source vocabulary"),
    ([[3, 4], []], [[3], [4]], ValueError, r"sources\[1\] is empty"),
    ([], [], ValueError, r"sources is empty"),
    ([[3, 4], [5]], [[3], [4.5]], TypeError, r"targets\[1\] must be a 1-D sequence of integer token ids"),
    ([[3, 4], [5]], [[3], [[4], [5, 6]]], TypeError, r"targets\[1\] must be a flat sequence"),
    ([[3, 4], [5]], [[3], "ab"], TypeError, r"targets\[1\] must be a sequence of integer token ids, got str"),
    ([[3, 4], [5]], "ab", TypeError, r"targets must be a list of token-id sequences"),
    ([[3, 4], [5]], [[3], [True]], TypeError, r"targets\[1\] must be a 1-D sequence of integer token ids"),
    ([[3, 4], [5]], [[3], [4] * 128], ValueError, r"targets\[1\] has 128 tokens: with the start token the decoder "
                                                 r"reads 129, more than the model's 128 positions"),
    ([[3, 4], [5] * 129], [[3], [4]], ValueError, r"sources\[1\] has 129 tokens, more than the model's 128 positions"),
])
def test_bad_input_is_refused_by_name(marian, sources, targets, error, match):
    _, model, _ = marian
    with pytest.raises(error, match=match):
        model.score(sources, targets)


def test_the_longest_target_the_positions_allow_is_scored(marian):
    _, model, _ = marian
    (result,) = model.score([[3, 4]], [[4] * 127])
    assert len(result.log_probs) == 128 and np.isfinite(result.log_probs).all()


@pytest.mark.parametrize("value", [0, -1, 1.5, True, None])
def test_bad_max_batch_size(marian, value):
    _, model, _ = marian
    with pytest.raises(ValueError, match="max_batch_size must be a positive integer"):
        model.score([[3]], [[4]], max_batch_size=value)


def test_nan_logits_are_an_error_naming_the_source():
    from seqjit.errors import NonFiniteLogits

    from ..gpu.conftest import tiny_models

    model = tiny_models()["transformer"]
    model.weights["final_logits_bias"][5] = np.nan  # every position's normaliser is NaN
    with pytest.raises(NonFiniteLogits, match=r"scoring sources\[\d\]: the logits of position 0 hold NaN"):
        model.score([[3, 4], [6]], [[5], []])


def test_a_target_too_long_for_the_logits_budget_is_stepped(monkeypatch):
    """An RNN has no position limit: a target whose [1, T, V] logits pass the budget alone runs step
    by step (one position's logits at a time) and scores as the one-pass run."""
    from seqjit.decoding import scoring

    torch.manual_seed(1)
    model = from_torch(Plain(cell="gru").eval().state_dict(), arch="rnn_seq2seq")
    sources, targets = [[3, 4, 5], [6]], [[7] * 40, [8, 9]]
    want = model.score(sources, targets)
    monkeypatch.setattr(scoring, "LOGITS_BUDGET", 20 * VT * 4)  # 20 positions: the 41 of row 0 do not fit
    full = model.logits
    monkeypatch.setattr(model, "logits", lambda *a: (_ for _ in ()).throw(AssertionError("one pass")))
    got = scoring.score(model, sources[:1], targets[:1])
    np.testing.assert_allclose(got[0].log_probs, want[0].log_probs, atol=1e-6, rtol=0)
    monkeypatch.setattr(model, "logits", full)
    assert [r.ids for r in scoring.score(model, sources, targets)] == [r.ids for r in want]
