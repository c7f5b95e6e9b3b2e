"""``target_prefix`` (per source: tokens forced after the decoder start token, then free decoding)
against transformers' ``generate`` given the prefix as ``decoder_input_ids`` (greedy and beam 4, on
random tiny Marian and BART models) and CTranslate2's ``target_prefix`` on the same converted Marian;
a batch of sources with different prefix lengths, none included."""
import numpy as np
import pytest
import torch

import seqjit
from seqjit.decoding.strategy import choose

from ..models.conftest import tiny_hf
from .test_scoring import _StubTokenizer, _name

EOS, PAD = 0, 95
MAX_LENGTH = 8
CT2_MAX_LENGTH = 12
#: one entry per source: none (None and []), 1..5 tokens, one holding the end token (which does not
#: end it, as transformers reads a prompt)
PREFIXES = [None, [20, 21, 22], [], [30], [40, 41, 42, 43, 44], [50, 51], None, [7, EOS, 9], [60]]


def _sources(n, seed=0, vocab=PAD):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, vocab, size=int(rng.integers(2, 10))).tolist() + [EOS] for _ in range(n)]


def _marian(make_tiny_marian, path, end_bias):
    """(transformers Marian, seqjit model, directory): pad row zero and pad logit -1e4 (as CTranslate2
    reads the model, see test_scoring), the end token's logit raised by ``end_bias``."""
    hf = make_tiny_marian(seed=3)
    with torch.no_grad():
        hf.model.shared.weight[PAD].zero_()
        hf.final_logits_bias[0, PAD] = -1e4
        hf.final_logits_bias[0, EOS] += end_bias
    hf.save_pretrained(path / "hf", safe_serialization=True)
    return hf, seqjit.from_hf(path / "hf"), path


@pytest.fixture(scope="module")
def marian(make_tiny_marian, tmp_path_factory):
    """The tiny Marian whose hypotheses often end (its end token's logit raised)."""
    return _marian(make_tiny_marian, tmp_path_factory.mktemp("marian_prefix"), 4.5)


@pytest.fixture(scope="module")
def plain_marian(make_tiny_marian, tmp_path_factory):
    """The same Marian as it was drawn (its hypotheses run to max_length)."""
    return _marian(make_tiny_marian, tmp_path_factory.mktemp("marian_plain"), 0.0)


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    path = tmp_path_factory.mktemp("bart_prefix")
    hf = tiny_hf("bart", path)
    return hf, seqjit.from_hf(path)


def _hf_reference(hf, model, sources, prefixes, beam, **rules):
    """Per source, transformers' (ids after the start token up to the first end token after the
    prefix, that token dropped; score of the generated tokens), one source per call."""
    out_rows = []
    for src, prefix in zip(sources, prefixes):
        prompt = [model.decoder_start_id] + list(prefix or [])
        with torch.inference_mode():
            out = hf.generate(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([prompt]),
                              bad_words_ids=[[model.pad_id]], do_sample=False, num_beams=beam,
                              max_length=MAX_LENGTH + 1, return_dict_in_generate=True, output_scores=True,
                              **({"length_penalty": 0.0} if beam > 1 else {}), **rules)
        seq = out.sequences[0, 1:].tolist()
        p = len(prefix or [])
        cut = next((k for k in range(p, len(seq)) if seq[k] == model.eos_id), None)
        if beam > 1:
            score = float(out.sequences_scores[0])
        else:
            steps = hf.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
            score = float(steps[:(len(seq) if cut is None else cut + 1) - p].sum())
        out_rows.append((seq if cut is None else seq[:cut], score))
    return out_rows


def _check(got, want):
    for i, (res, (ids, score)) in enumerate(zip(got, want)):
        assert res.ids[0] == ids, f"source {i}"
        assert res.scores[0] == pytest.approx(score, abs=1e-4), f"source {i}"


@pytest.mark.parametrize("rules", [{}, {"begin_suppress_tokens": [54, 75, 38, 64]}])
@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("family", ["marian", "bart"])
def test_equals_transformers_with_decoder_input_ids(marian, bart, family, beam, rules):
    """``begin_suppress_tokens`` apply at the first step after the prefix, as transformers' begin
    index is the prompt's length."""
    hf, model = (marian[0], marian[1]) if family == "marian" else bart
    sources = _sources(len(PREFIXES), seed=beam, vocab=model.source_vocab_size - 1)
    want = _hf_reference(hf, model, sources, PREFIXES, beam, **rules)
    print(f"\n{family} beam {beam}: lengths {[len(ids) for ids, _ in want]}")
    assert any(len(ids) < MAX_LENGTH for ids, _ in want)  # some hypotheses end before max_length
    for max_batch_size in (64, 2):  # sorted by length and cut into batches: the prefixes move with their sources
        got = model.generate(sources, target_prefix=PREFIXES, beam_size=beam, max_length=MAX_LENGTH,
                             length_penalty=0.0, return_scores=True, max_batch_size=max_batch_size, **rules)
        _check(got, want)


def _translator(path):
    import ctranslate2  # the test extra's
    from ctranslate2.converters import TransformersConverter

    class Converter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return _StubTokenizer()

    Converter(str(path / "hf")).convert(str(path / "ct2"), quantization="float32", force=True)
    return ctranslate2.Translator(str(path / "ct2"), device="cpu", compute_type="float32", intra_threads=1)


def _ct2_check(pair, beam, length_penalty, min_length, ends):
    _, model, path = pair
    prefixes = [p for p in PREFIXES if EOS not in (p or [])] * 2
    sources = _sources(len(prefixes), seed=7)
    theirs = _translator(path).translate_batch(
        [[_name(i) for i in s] for s in sources],
        target_prefix=[None if not p else [_name(i) for i in p] for p in prefixes], beam_size=beam,
        max_decoding_length=CT2_MAX_LENGTH, min_decoding_length=min_length, length_penalty=length_penalty,
        return_scores=True)
    ours = model.generate(sources, target_prefix=prefixes, beam_size=beam, max_length=CT2_MAX_LENGTH,
                          min_length=min_length, length_penalty=length_penalty, return_scores=True, max_batch_size=4)
    assert any(len(r.ids[0]) < CT2_MAX_LENGTH for r in ours) == ends
    for i, (res, ref) in enumerate(zip(ours, theirs)):
        assert [_name(t) for t in res.ids[0]] == ref.hypotheses[0], f"source {i}"
        assert res.scores[0] == pytest.approx(ref.scores[0], abs=1e-4), f"source {i}"


@pytest.mark.parametrize("min_length", [0, 7])
def test_greedy_equals_ctranslate2_target_prefix(marian, min_length):
    """CTranslate2 4.8: the hypotheses begin with the prefix, the scores leave its log-probabilities
    out, max_decoding_length and min_decoding_length count it (CTranslate2 divides a greedy score by
    its length ** length_penalty too: compared at length_penalty 0)."""
    _ct2_check(marian, 1, 0.0, min_length, ends=True)


@pytest.mark.parametrize("length_penalty", [1.0, 0.0])
def test_beam_equals_ctranslate2_target_prefix(plain_marian, length_penalty):
    """Beam 4: a hypothesis's length penalty divides by its whole length, the prefix included, as
    CTranslate2 does (transformers divides by the generated length). On the Marian whose hypotheses
    run to max_length: where they end, CTranslate2's beam search differs from transformers' (which
    seqjit follows) without a prefix too (its stopping rule, at length_penalty 1), and with one it
    also bans the end token from every beam but the best at the first step after a prefix (its
    issue 277), which transformers and seqjit do not."""
    _ct2_check(plain_marian, 4, length_penalty, 0, ends=False)


def test_sampling_forces_the_prefix_then_draws_as_without(marian):
    """Sampling: each hypothesis begins with its prefix; a source without one draws what it draws
    in a call without prefixes (the same Philox stream of (seed, source, step), on another path)."""
    _, model, _ = marian
    sources = _sources(len(PREFIXES), seed=3)
    free = model.generate(sources, sampling_topk=0, seed=11, max_length=MAX_LENGTH)
    got = model.generate(sources, target_prefix=PREFIXES, sampling_topk=0, seed=11, max_length=MAX_LENGTH,
                         max_batch_size=3)
    for i, (res, prefix) in enumerate(zip(got, PREFIXES)):
        assert res.ids[0][:len(prefix or [])] == list(prefix or []), f"source {i}"
        if not prefix:
            assert res.ids[0] == free[i].ids[0], f"source {i}"


@pytest.mark.parametrize("beam", [1, 4])
def test_a_prefix_as_long_as_max_length_is_the_hypothesis(marian, beam):
    _, model, _ = marian
    prefix = [11, 12, 13, 14]
    res = model.generate([[5, 6, EOS]], target_prefix=[prefix], max_length=4, beam_size=beam, return_scores=True)
    assert res[0].ids[0] == prefix and res[0].scores[0] == 0.0


def test_which_paths_force_a_prefix(marian):
    """The runner and the native decode (greedy search, sampling, beam search) force the prefix in
    their loops (native beam search declines a prefix holding an end token); the native stream:
    test_stream_prefix. Prefixes that are all empty decode as without them."""
    _, model, _ = marian
    sources = _sources(3)
    for beam in (1, 4):
        choice = choose(model, seqjit.decoding.DecodingOptions(beam_size=beam, target_prefix=([1], None, [])).validate(),
                        rows=3)
        assert choice.path == "runner", choice
    ended = choose(model, seqjit.decoding.DecodingOptions(beam_size=4, target_prefix=([1, EOS], None, [])).validate(),
                   rows=3)
    assert ended.path == "python" and "native: a target_prefix holding an end token" in ended.why
    for size in (1, 4):
        empty = model.generate(sources, target_prefix=[None, [], None], beam_size=size, return_scores=True)
        plain = model.generate(sources, beam_size=size, return_scores=True)
        assert [(r.ids, r.scores) for r in empty] == [(r.ids, r.scores) for r in plain]


LOOP_OPTIONS = [dict(), dict(sampling_topk=0, seed=5), dict(sampling_topk=4, seed=2), dict(min_length=6),
                dict(forced_eos_id=EOS), dict(forced_eos_id=EOS, max_length=5), dict(beam_size=4),
                dict(beam_size=4, length_penalty=1.0, num_hypotheses=2),
                dict(beam_size=3, forced_bos_id=5, forced_eos_id=EOS, repetition_penalty=1.3, no_repeat_ngram_size=2,
                     min_length=4)]
#: the runner declines a forced token in greedy search (test_declarations): those run on the native decode only
LOOP_CASES = [(o, path) for o in LOOP_OPTIONS for path in ("native", "runner")
              if path == "native" or o.get("beam_size", 1) > 1 or not {"forced_eos_id", "forced_bos_id"} & set(o)]


@pytest.mark.parametrize("options, path", LOOP_CASES)
def test_native_loops_equal_the_python_loop(marian, options, path):
    """The native loops' forced prefix tokens (the native decode and the runner; greedy, sampling
    and beam search, with min_length, forced first and end tokens, processors, a prefix as long as
    max_length; greedy and sampling: an end token inside a prefix) against the Python loop."""
    _, model, _ = marian
    options = {"max_length": MAX_LENGTH, **options}
    prefixes = PREFIXES + [[1] * options["max_length"], [3] * (options["max_length"] - 1) + [EOS]]
    if options.get("beam_size", 1) > 1:  # native beam search declines a prefix holding an end token
        prefixes = [p if EOS not in (p or []) else [p[0]] for p in prefixes]
    sources = _sources(len(prefixes), seed=9) * 2
    prefixes = prefixes * 2
    if path == "runner":  # fewer than 16 rows (sources x beams) in one batch
        keep = 15 // options.get("beam_size", 1)
        sources, prefixes = sources[-keep:], prefixes[-keep:]
    spec = seqjit.decoding.DecodingOptions(target_prefix=prefixes, **options).validate()
    assert choose(model, spec, rows=len(sources), max_batch_size=16).path == path
    native = model.generate(sources, target_prefix=prefixes, return_scores=True, max_batch_size=16, **options)
    model.set_replay("python")
    try:
        python = model.generate(sources, target_prefix=prefixes, return_scores=True, **options)
    finally:
        model.set_replay(None)
    for i, (a, b) in enumerate(zip(native, python)):
        assert a.ids == b.ids, f"source {i}"
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-5, err_msg=f"source {i}")  # as test_native_sampling
    assert any(a.ids[0][:len(p or [])] == list(p or []) and p for a, p in zip(native, prefixes))


def test_generate_stream_forces_the_prefix(marian):
    _, model, _ = marian
    source, prefix = [5, 6, 7, EOS], [20, 21, 22]
    streamed = [t.token for t in model.generate_stream(source, target_prefix=[prefix], max_length=MAX_LENGTH)]
    assert streamed[:3] == prefix
    assert streamed[:len(model.generate([source], target_prefix=[prefix], max_length=MAX_LENGTH)[0].ids[0])] \
        == model.generate([source], target_prefix=[prefix], max_length=MAX_LENGTH)[0].ids[0]


@pytest.mark.parametrize("prefix, error, match", [
    ([[1, 2]], ValueError, r"target_prefix must have one entry per source \(2\), got 1"),
    ([[1], [2], [3]], ValueError, r"one entry per source \(2\), got 3"),
    ([[1], [2, 96]], ValueError, r"target_prefix\[1\] holds token id 96, outside the target vocabulary"),
    ([[1], [-1]], ValueError, r"target_prefix\[1\] holds token id -1"),
    ([[1], [1] * 9], ValueError, r"target_prefix\[1\] has 9 tokens, more than max_length 8"),
    ([[1], ["a"]], TypeError, r"target_prefix\[1\] must hold integer token ids"),
    ([[1], [1.0]], TypeError, r"target_prefix\[1\] must hold integer token ids"),
    ([[1], [True]], TypeError, r"target_prefix\[1\] must hold integer token ids"),
    ([[1], 5], TypeError, r"target_prefix\[1\] must be a list of token ids or None"),
    ("ab", TypeError, r"target_prefix must be a list"),
    (7, TypeError, r"target_prefix must be a list"),
])
def test_a_bad_prefix_is_refused_by_name(marian, prefix, error, match):
    _, model, _ = marian
    with pytest.raises(error, match=match):
        model.generate([[5, 6, EOS], [7, EOS]], target_prefix=prefix, max_length=MAX_LENGTH)


def test_a_prefix_longer_than_the_lowered_max_length_is_refused(marian):
    """The default max_length is lowered to the model's positions (128): a prefix is checked against that."""
    _, model, _ = marian
    with pytest.raises(ValueError, match=r"target_prefix\[0\] has 200 tokens, more than max_length 128"):
        model.generate([[5, EOS]], target_prefix=[[3] * 200])


def test_transformers_names_point_to_the_options(marian):
    from seqjit.errors import UnknownOptionError

    _, model, _ = marian
    with pytest.raises(UnknownOptionError, match=r"'decoder_input_ids' \(did you mean target_prefix"):
        model.generate([[5, EOS]], decoder_input_ids=[[PAD, 7]])
    with pytest.raises(UnknownOptionError, match=r"'eos_token_id' \(did you mean end_token"):
        model.generate([[5, EOS]], eos_token_id=[0, 7])
