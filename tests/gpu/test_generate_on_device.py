"""End to end on the GPU (numba's simulator without one): every architecture moved with
``model.to("cuda")`` gives the CPU path's ids (greedy and beam search, a batch of sources of different
lengths), its scores, and its teacher-forced logits within 1e-4. The CPU path is itself checked
against PyTorch / transformers in tests/models and tests/decoding.
"""
import numpy as np
import pytest

from seqjit.decoding import processors

from .conftest import SOURCES, cuda_or_skip, tiny_models

ARCHS = ["transformer", "rnn_seq2seq", "bahdanau", "luong"]
LOGITS_TOL = 1e-4


@pytest.fixture(scope="module")
def pairs():
    """name -> (CPU model, the same weights on the GPU)."""
    cuda_or_skip()
    cpu, gpu = tiny_models(), tiny_models()
    for model in gpu.values():
        model.to("cuda")
    return {name: (cpu[name], gpu[name]) for name in ARCHS}


def _ids(results):
    return [r.ids for r in results]


@pytest.mark.parametrize("arch", ARCHS)
def test_teacher_forced_logits_match_the_cpu(pairs, arch):
    cpu, gpu = pairs[arch]
    src = np.array([[3, 4, 5], [6, 7, 0], [8, 0, 0]])
    lengths = np.array([3, 2, 1])
    tgt = np.array([[1, 5, 6], [1, 7, 2], [1, 3, 3]])
    want = cpu.logits_stepwise(src, tgt, lengths)
    got = gpu.logits_stepwise(src, tgt, lengths)
    assert got.shape == want.shape and isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, want, atol=LOGITS_TOL, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_ids_and_scores_match_the_cpu(pairs, arch):
    cpu, gpu = pairs[arch]
    options = dict(max_length=5, return_scores=True, min_length=1 if arch == "luong" else 0)
    want = cpu.generate(SOURCES, **options)
    got = gpu.generate(SOURCES, **options)
    assert _ids(got) == _ids(want)
    np.testing.assert_allclose([r.scores[0] for r in got], [r.scores[0] for r in want], atol=1e-4, rtol=0)


@pytest.mark.parametrize("arch", ["transformer", "rnn_seq2seq", "bahdanau"])
def test_beam_ids_and_scores_match_the_cpu(pairs, arch):
    cpu, gpu = pairs[arch]
    options = dict(beam_size=2, num_hypotheses=2, max_length=5, return_scores=True, length_penalty=0.7)
    want = cpu.generate(SOURCES, **options)
    got = gpu.generate(SOURCES, **options)
    assert _ids(got) == _ids(want)
    np.testing.assert_allclose([r.scores for r in got], [r.scores for r in want], atol=1e-4, rtol=0)


def test_processors_and_attention_on_the_device(pairs):
    """Repetition penalty, no-repeat n-grams and min_length run on the device; attention comes back."""
    cpu, gpu = pairs["bahdanau"]
    options = dict(max_length=5, repetition_penalty=1.5, no_repeat_ngram_size=2, min_length=3, return_scores=True,
                   return_attention=True)
    want = cpu.generate(SOURCES[:2], **options)
    got = gpu.generate(SOURCES[:2], **options)
    assert _ids(got) == _ids(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.scores, w.scores, atol=1e-4, rtol=0)
        np.testing.assert_allclose(g.attention[0], w.attention[0], atol=1e-5, rtol=0)


def test_only_ids_cross_per_generated_token(pairs, transfers):
    """Greedy decoding with every row running max_length steps: the source ids and lengths go up once,
    each step brings the B chosen ids down, the scores come down at the end, and nothing else crosses
    (the weights went up at model.to, the suppressed ids with the model's first decode)."""
    _, gpu = pairs["transformer"]
    steps, batch = 4, len(SOURCES)
    gpu.generate(SOURCES[:1], max_length=2, return_scores=True)
    counted = transfers()
    results = gpu.generate(SOURCES, max_length=steps, min_length=steps, return_scores=True)
    assert all(len(r.ids[0]) >= steps - 1 for r in results)
    assert counted.implicit == []
    ids = ((batch,), np.dtype(np.int64))
    assert counted.downloads == [ids] * steps + [((batch,), np.dtype(np.float64))]
    width = max(len(s) for s in SOURCES)
    assert sorted(counted.uploads, key=str) == sorted([((batch,), np.dtype(np.int64)), ((batch, width), np.dtype(np.int64))], key=str)


def test_many_steps_need_no_more_uploads(pairs, transfers):
    """The uploads of a decode do not grow with its length (beam search too)."""
    _, gpu = pairs["rnn_seq2seq"]
    gpu.generate(SOURCES[:1], beam_size=2, max_length=2)  # the model's once-only uploads (suppressed ids)
    counts = []
    for steps in (2, 4):
        counted = transfers()
        gpu.generate(SOURCES[:2], beam_size=2, max_length=steps, min_length=steps)
        assert counted.implicit == []
        counts.append((len(counted.uploads), len(counted.downloads)))
    assert counts[0][0] == counts[1][0]
    assert counts[1][1] - counts[0][1] == 2  # one status read per step


def test_sampling_on_the_device(pairs):
    """Seeded sampling draws from the CPU samplers' stream: the CPU's ids (batched differently too);
    every drawn token is among the CPU's top-k at its step, and the scores are the CPU's
    log-probabilities of the drawn tokens (teacher-forced on the CPU)."""
    cpu, gpu = pairs["transformer"]
    options = dict(max_length=4, sampling_topk=3, sampling_temperature=0.8, seed=5, return_scores=True)
    got = gpu.generate(SOURCES[:3], **options)
    assert _ids(gpu.generate(SOURCES[:3], max_batch_size=2, **options)) == _ids(got)
    assert _ids(cpu.generate(SOURCES[:3], **options)) == _ids(got)
    for src, res in zip(SOURCES[:3], got):
        ids = res.ids[0]
        eos_ended = len(ids) < options["max_length"]
        steps = ids + ([cpu.eos_id] if eos_ended else [])
        tgt = np.array([[cpu.decoder_start_id] + steps[:-1]])
        logits = cpu.logits_stepwise(np.array([src]), tgt)[0]
        logits[:, cpu.pad_id] = -np.inf
        logp = processors.log_softmax(logits)
        for t, token in enumerate(steps):
            assert token in np.argsort(-logits[t], kind="stable")[:3]
        np.testing.assert_allclose(res.scores[0], sum(logp[t, tok] for t, tok in enumerate(steps)), atol=1e-4)


def test_what_the_device_loops_leave_to_the_host_loops(pairs):
    """A callback, streaming, and beam search with attention run the CPU loops on the device model
    (its step brings the logits to the host): the CPU path's results."""
    cpu, gpu = pairs["luong"]
    seen = []
    got = gpu.generate(SOURCES[:2], max_length=4, callback=lambda tok: seen.append(tok.token) and False)
    assert _ids(got) == _ids(cpu.generate(SOURCES[:2], max_length=4))
    assert len(seen) >= sum(len(r.ids[0]) for r in got)
    assert [t.token for t in gpu.generate_stream(SOURCES[0], max_length=4)] == \
        [t.token for t in cpu.generate_stream(SOURCES[0], max_length=4)]
    options = dict(beam_size=2, max_length=3, return_attention=True)
    want, got = cpu.generate(SOURCES[1:3], **options), gpu.generate(SOURCES[1:3], **options)
    assert _ids(got) == _ids(want)
    np.testing.assert_allclose(got[0].attention[0], want[0].attention[0], atol=1e-5)


@pytest.mark.parametrize("options", [dict(), dict(beam_size=2), dict(sampling_topk=3, seed=1)])
def test_the_source_ids_are_checked_once_per_call(pairs, monkeypatch, options):
    """On the device too: the decoding layer's one check (pad_sources, check_vocab), none by the
    model's start (``check_ids``), greedy, beam and sampling alike."""
    from seqjit.decoding import batch
    from seqjit.models import contract

    calls = []
    for owner, name in ((batch, "pad_sources"), (batch, "check_vocab"), (contract, "check_ids")):
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    _, gpu = pairs["transformer"]
    gpu.generate(SOURCES, max_length=4, **options)
    assert sorted(calls) == ["check_vocab", "pad_sources"], calls


@pytest.mark.parametrize("options", [dict(), dict(beam_size=2)])
def test_a_target_prefix_on_the_device_model(pairs, options):
    """Greedy search and beam search force a target_prefix in the device loops (test_prefix_on_device):
    the CPU path's ids and scores, the prefixes moving with their sources (sorted by length)."""
    cpu, gpu = pairs["transformer"]
    prefixes = [[5, 6], None, [7], []]
    options = dict(max_length=5, return_scores=True, target_prefix=prefixes, **options)
    want, got = cpu.generate(SOURCES, **options), gpu.generate(SOURCES, max_batch_size=2, **options)
    assert _ids(got) == _ids(want)
    assert all(r.ids[0][:len(p or [])] == list(p or []) for r, p in zip(got, prefixes))
    np.testing.assert_allclose([r.scores for r in got], [r.scores for r in want], atol=1e-4)
    with pytest.raises(ValueError, match="return_alternatives is not supported on a device"):
        gpu.generate(SOURCES, return_alternatives=True, num_hypotheses=2)
