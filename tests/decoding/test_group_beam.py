"""Group (diverse) beam search in the default run: its options checked before anything is decoded,
the native and device paths declining it (the Python beam loop decodes it), a Hugging Face generation
config's group settings reported as the seqjit options, and a batch decoding each source as alone.
Its reference test against transformers 4.x's group_beam_search: test_group_beam_hf4.py (.ci/hf4)."""
import json
import warnings

import pytest

import seqjit
from seqjit.convert.hf_generation import GenerationDefaultsWarning
from seqjit.decoding import strategy
from seqjit.decoding.inputs import parse_options, resolve_rules

GROUPS = dict(beam_size=4, num_beam_groups=2, diversity_penalty=0.5)


@pytest.mark.parametrize("options,match", [
    (dict(beam_size=4, num_beam_groups=3, diversity_penalty=0.5), r"num_beam_groups \(3\) must divide beam_size \(4\)"),
    (dict(beam_size=4, num_beam_groups=0), r"num_beam_groups must be an integer >= 1"),
    (dict(beam_size=4, num_beam_groups=2.0), r"num_beam_groups must be an integer >= 1"),
    (dict(beam_size=4, num_beam_groups=2, diversity_penalty=-0.5), r"diversity_penalty must be a finite number >= 0"),
    (dict(beam_size=4, num_beam_groups=2, diversity_penalty=float("nan")), r"diversity_penalty must be a finite"),
    (dict(beam_size=4, diversity_penalty=0.5), r"diversity_penalty \(0.5\) needs num_beam_groups > 1"),
    (dict(num_beam_groups=2, diversity_penalty=0.5, sampling_topk=0), r"num_beam_groups > 1 .* sampling"),
    (dict(GROUPS, return_attention=True), r"return_attention is not supported with num_beam_groups"),
])
def test_group_options_refused_by_name(marian_pair, options, match):
    _, model = marian_pair
    with pytest.raises(ValueError, match=match):
        model.generate([[5, 6, 0]], **options)


def test_native_and_device_paths_decline_groups(marian_pair):
    """choose routes a group beam search to the Python loop, whatever the batch, each native path and
    the device loops saying why."""
    from seqjit.gpu.generate import supports

    _, model = marian_pair
    opts = resolve_rules(model, parse_options(dict(GROUPS)))
    for rows in (1, 2, 40):
        answers = strategy.declarations(strategy.Request(model, opts, rows, 64, None, False))
        assert "num_beam_groups" in answers["native"] and answers["runner"] == answers["native"]
        assert answers["python"] is None
        choice = strategy.choose(model, opts, rows=rows)
        assert (choice.path, choice.search) == ("python", "beam"), choice
    assert "num_beam_groups" in supports(opts, None, model.target_vocab_size)
    plain = resolve_rules(model, parse_options(dict(beam_size=4)))
    assert strategy.choose(model, plain, rows=2).path != "python"  # plain beam stays native


def test_a_batch_decodes_each_source_as_alone(marian_pair, marian_sources):
    """Sources finishing at different steps leave the batch (their groups done) without changing the
    others."""
    _, model = marian_pair
    sources = marian_sources(6, seed=2)
    options = dict(beam_size=6, num_beam_groups=3, diversity_penalty=1.0, num_hypotheses=3, max_length=16,
                   return_scores=True)
    together = model.generate(sources, **options)
    for source, result in zip(sources, together):
        alone = model.generate([source], **options)[0]
        assert alone.ids == result.ids
        assert alone.scores == pytest.approx(result.scores, abs=1e-5)


def test_generation_config_groups_reported_as_the_options(marian_pair, tmp_path):
    """num_beam_groups / diversity_penalty in generation_config.json: transformers' generate defaults,
    named with the seqjit options of the same names (not refused)."""
    hf, _ = marian_pair
    hf.save_pretrained(tmp_path)
    path = tmp_path / "generation_config.json"
    config = json.loads(path.read_text()) if path.exists() else {"eos_token_id": 0, "decoder_start_token_id": 95}
    config.update(num_beams=4, num_beam_groups=2, diversity_penalty=0.5)
    path.write_text(json.dumps(config))
    with pytest.warns(GenerationDefaultsWarning, match=r"num_beam_groups=2 \(seqjit: num_beam_groups=2\); "
                                                       r"diversity_penalty=0.5 \(seqjit: diversity_penalty=0.5\)"):
        model = seqjit.from_hf(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenerationDefaultsWarning)
        assert len(model.generate([[5, 6, 0]], **GROUPS)[0].ids) == 1
