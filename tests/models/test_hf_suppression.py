"""The suppression options (``suppress_tokens``, ``begin_suppress_tokens``, ``bad_words_ids``,
``suppress_pad_token``) against ``transformers.generate`` with the same rules, greedy and beam 4, on
every decode path (native loops, Python loops): given per call, and read from
``generation_config.json`` at conversion as the model's defaults."""
import collections
import json

import numpy as np
import pytest
import torch

import seqjit
from seqjit.decoding import processors

from .conftest import tiny_hf
from .test_hf_families_generate import MAX_NEW, N_SOURCES, _check, _sources, hf_generate


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    path = tmp_path_factory.mktemp("bart_suppress")
    hf = tiny_hf("bart", path, seed=3)
    return hf, seqjit.from_hf(path), path


def _common(ref, first=False, k=3):
    """The ``k`` tokens the plain decode picks most (or most as its first token)."""
    counts = collections.Counter(t for ids, _ in ref for t in (ids[:1] if first else ids))
    return [t for t, _ in counts.most_common(k)]


def _bigram(ref):
    counts = collections.Counter(tuple(ids[i:i + 2]) for ids, _ in ref for i in range(len(ids) - 1))
    return list(counts.most_common(1)[0][0])


def _rules(ref, model):
    """Rules that change the plain decode: its most common tokens, first tokens and bigram."""
    a, b = _bigram(ref)
    return {"suppress_tokens": _common(ref)[:2], "begin_suppress_tokens": _common(ref, first=True),
            "bad_words_ids": [[a, b], [_common(ref)[2]], [model.eos_id]]}


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("rule", ["suppress_tokens", "begin_suppress_tokens", "bad_words_ids", "all"])
def test_rules_given_per_call_match_transformers(bart, rule, beam):
    hf, model, _ = bart
    sources = _sources(N_SOURCES, model.target_vocab_size, seed=7)
    plain = hf_generate(hf, model, sources, num_beams=beam)
    rules = _rules(plain, model)
    if rule != "all":
        rules = {rule: rules[rule]}
    hf_rules = dict(rules)
    hf_rules["bad_words_ids"] = rules.get("bad_words_ids", []) + [[model.pad_id]]
    ref = hf_generate(hf, model, sources, num_beams=beam, **hf_rules)
    assert ref != plain, "the rule changes nothing on these sources"
    _check(model, sources, ref, beam_size=beam, **rules)


@pytest.mark.parametrize("beam", [1, 4])
def test_pad_token_allowed(tmp_path, beam):
    """``suppress_pad_token=False``: the pad token may be generated (transformers never bans it)."""
    hf = tiny_hf("bart", tmp_path, seed=3)
    with torch.no_grad():
        hf.final_logits_bias[0, hf.config.pad_token_id] = 5.0  # pad now among the best tokens
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model = seqjit.from_hf(tmp_path)
    sources = _sources(N_SOURCES, model.target_vocab_size, seed=8)
    ref = hf_generate(hf, model, sources, num_beams=beam, bad_words_ids=None)
    assert any(model.pad_id in ids for ids, _ in ref)
    _check(model, sources, ref, beam_size=beam, suppress_pad_token=False)
    banned = hf_generate(hf, model, sources, num_beams=beam)
    assert banned != ref
    _check(model, sources, banned, beam_size=beam)


@pytest.mark.parametrize("beam", [1, 4])
def test_rules_from_generation_config(bart, tmp_path, beam):
    """Rules in generation_config.json are the converted model's defaults (and () turns one off)."""
    hf, model, path = bart
    sources = _sources(N_SOURCES, model.target_vocab_size, seed=9)
    rules = _rules(hf_generate(hf, model, sources, num_beams=beam), model)
    rules["bad_words_ids"] = rules["bad_words_ids"] + [[model.pad_id]]
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((path / name).read_bytes())
    gen = json.loads((tmp_path / "generation_config.json").read_text())
    (tmp_path / "generation_config.json").write_text(json.dumps({**gen, **rules}))
    converted = seqjit.from_hf(tmp_path)
    assert converted.config.suppress_tokens == rules["suppress_tokens"]
    ref = hf_generate(hf, model, sources, num_beams=beam, **rules)
    _check(converted, sources, ref, beam_size=beam)
    off = hf_generate(hf, model, sources, num_beams=beam, bad_words_ids=[[model.pad_id]])
    _check(converted, sources, off, beam_size=beam, suppress_tokens=(), begin_suppress_tokens=(), bad_words_ids=())


def test_sampling_never_draws_a_suppressed_token(bart):
    """Sampling (native and Python loops): suppressed and banned tokens never drawn, at any seed."""
    _, model, _ = bart
    sources = _sources(20, model.target_vocab_size, seed=10)
    banned = list(range(3, 40))
    for replay in (None, "python"):
        model.set_replay(replay)
        try:
            got = model.generate(sources, sampling_topk=0, seed=5, max_length=MAX_NEW, suppress_tokens=banned,
                                 begin_suppress_tokens=[40, 41], bad_words_ids=[[42], [43, 44]])
        finally:
            model.set_replay(None)
        for r in got:
            ids = r.ids[0]
            assert not set(ids) & set(banned + [42, model.pad_id]), ids
            assert not ids or ids[0] not in (40, 41)
            assert all(ids[i:i + 2] != [43, 44] for i in range(len(ids) - 1))


def test_bad_words_processor_bans_after_the_prefix():
    scores = np.zeros((3, 6), np.float32)
    history = np.array([[0, 1, 2], [0, 2, 1], [0, 1, 1]])

    class O:
        bad_words_ids = ((1, 2, 3), (1, 4), (5,), (2,))

    processors.apply_bad_words(scores, history, O, eos_id=2)
    assert np.isneginf(scores).tolist() == [[False, False, False, True, False, True],
                                             [False, False, False, False, True, True],
                                             [False, False, False, False, True, True]]


@pytest.mark.parametrize("options,match", [
    ({"suppress_tokens": [1, -2]}, "suppress_tokens must be a list of non-negative token ids"),
    ({"bad_words_ids": [3, 4]}, "bad_words_ids"),
    ({"bad_words_ids": [[]]}, r"bad_words_ids\[0\] is empty"),
    ({"begin_suppress_tokens": [96]}, r"begin_suppress_tokens holds token id 96, outside the target vocabulary"),
    ({"suppress_pad_token": "no"}, "suppress_pad_token must be True, False or None"),
    ({"allow_pad": True}, "did you mean suppress_pad_token=False"),
])
def test_bad_options_are_named(bart, options, match):
    _, model, _ = bart
    with pytest.raises((ValueError, TypeError), match=match):
        model.generate([[5, 6]], **options)
