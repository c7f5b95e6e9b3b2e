"""Which path declares it decodes which options (``supports(request) -> reason | None``), pinned as a
table: a path that starts (or stops) decoding an option changes a row here, on purpose.
:func:`seqjit.decoding.strategy.choose` only reads these declarations (tested in test_strategy.py)."""
import pytest

from seqjit.decoding import strategy
from seqjit.decoding.inputs import parse_options, resolve_rules
from seqjit.decoding.spec import Request

ALL, NATIVE_ONLY, PYTHON_ONLY = {"runner", "native", "python"}, {"native", "python"}, {"python"}
CALLBACK = object()

#: (options, the CPU paths that decode them for 2 sources of the tiny Marian, whether the device loops do)
TABLE = [
    (dict(), ALL, True),
    (dict(min_length=2, suppress_tokens=(5,)), ALL, True),
    (dict(beam_size=4), ALL, True),
    (dict(beam_size=4, length_penalty=0.6, num_hypotheses=2), ALL, True),
    (dict(beam_size=200), PYTHON_ONLY, False),
    (dict(beam_size=4, num_beam_groups=2, diversity_penalty=0.5), PYTHON_ONLY, False),  # group beam: Python loop
    (dict(sampling_topk=0, seed=1), ALL, True),
    (dict(sampling_topk=5, sampling_temperature=0.7, seed=1), ALL, True),
    (dict(sampling_topk=0, sampling_topp=0.9, seed=1), ALL, False),
    (dict(forced_bos_id=5), NATIVE_ONLY, False),
    (dict(forced_eos_id=5), NATIVE_ONLY, False),
    (dict(forced_bos_id=5, beam_size=2), ALL, False),
    (dict(repetition_penalty=1.2), PYTHON_ONLY, True),
    (dict(repetition_penalty=1.2, beam_size=2), ALL, True),
    (dict(no_repeat_ngram_size=2), PYTHON_ONLY, True),
    (dict(no_repeat_ngram_size=2, beam_size=2), ALL, True),
    (dict(return_attention=True), PYTHON_ONLY, True),
    (dict(return_attention=True, beam_size=2), PYTHON_ONLY, False),
    (dict(begin_suppress_tokens=(5,)), PYTHON_ONLY, False),
    (dict(bad_words_ids=((5, 6),)), PYTHON_ONLY, False),
    (dict(bad_words_ids=((5,),)), ALL, True),
    (dict(callback=CALLBACK), PYTHON_ONLY, False),
    (dict(end_token=(0, 7)), PYTHON_ONLY, False),
    (dict(end_token=7, beam_size=2), PYTHON_ONLY, False),
    (dict(return_end_token=True), PYTHON_ONLY, False),
    (dict(max_input_length=4, truncate_input=True), ALL, True),  # applied to the batch, before any path
    (dict(target_prefix=((5, 6), ())), ALL, True),  # the native loops and the device loops force it
    (dict(target_prefix=((5,), (7,)), sampling_topk=0, seed=1), ALL, True),
    (dict(target_prefix=((5, 0), ())), ALL, True),  # an end token inside a prefix
    (dict(target_prefix=((5,), ()), forced_bos_id=5), PYTHON_ONLY, False),
    (dict(target_prefix=((5,), ()), beam_size=2), ALL, True),
    (dict(target_prefix=((5, 0), ()), beam_size=2), PYTHON_ONLY, False),  # an end token inside a prefix
]


def _answers(model, options: dict, rows: int = 2, stream: bool = False) -> dict:
    options = dict(options)
    callback = options.pop("callback", None)
    opts = resolve_rules(model, parse_options(options))
    return strategy.declarations(Request(model, opts, rows, 64, callback, stream))


@pytest.mark.parametrize("options,cpu,device", TABLE)
def test_each_path_declares_what_it_decodes(marian_pair, options, cpu, device):
    _, model = marian_pair
    answers = _answers(model, options)
    assert {path for path in ("runner", "native", "python") if answers[path] is None} == cpu, answers
    assert answers["device"] == "the model is on the CPU"  # the device path declines a CPU model
    assert all(answers[path] for path in answers if answers[path] is not None)  # a reason in words

    from seqjit.gpu.generate import supports

    opts = resolve_rules(model, parse_options({k: v for k, v in options.items() if k != "callback"}))
    declined = supports(opts, options.get("callback"), model.target_vocab_size, model.eos_id)
    assert (declined is None) == device, declined


def test_choose_takes_the_first_path_that_accepts(marian_pair):
    _, model = marian_pair
    for options, cpu, _ in TABLE:
        callback = options.get("callback")
        opts = resolve_rules(model, parse_options({k: v for k, v in options.items() if k != "callback"}))
        choice = strategy.choose(model, opts, rows=2, callback=callback)
        assert choice.path == next(p for p in ("runner", "native", "python") if p in cpu), (options, choice)


def test_the_stream_declarations(marian_pair):
    """``generate_stream``: the runner never streams; the native stream forces a target_prefix and
    the forced tokens, but not a forced first token that is the end token (its forced tokens never end
    a row)."""
    _, model = marian_pair
    plain, forced = _answers(model, {}, 1, stream=True), _answers(model, dict(forced_bos_id=5), 1, stream=True)
    assert plain["runner"] and plain["native"] is None
    assert forced["native"] is None
    ended = _answers(model, dict(forced_bos_id=model.eos_id), 1, stream=True)
    assert "a forced first token that is the end token" in ended["native"] and ended["python"] is None
    prefixed = _answers(model, dict(target_prefix=((5,),), forced_bos_id=5, forced_eos_id=7), 1, stream=True)
    assert prefixed["native"] is None


def test_a_larger_batch_is_declined_by_the_runner_only(marian_pair):
    _, model = marian_pair
    answers = _answers(model, {}, rows=16)
    assert "16 x 1 rows" in answers["runner"] and answers["native"] is None
