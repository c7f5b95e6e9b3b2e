"""Shared test settings.

CUDA kernels run on numba's CUDA simulator unless a real NVIDIA GPU is present: the variable must be
set before numba.cuda is first imported, which is why it is set here.
"""
import os
import sys

# ``python -m pytest`` puts the working directory (the repository root) first on sys.path, where the
# folder ``kernels/`` (installed as ``seqjit.kernels``) would shadow the ``kernels`` distribution that
# transformers >= 5 imports at start-up (Hugging Face's hub kernels): drop the root, seqjit is imported
# from its install
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ROOT]

# seqjit first: under SEQJIT_ISA it points Numba at the capped CPU, which must precede Numba's import
# (the simulator's lock below imports it)
import seqjit.kernels  # noqa: E402,F401

if "NUMBA_ENABLE_CUDASIM" not in os.environ and not os.path.exists("/dev/nvidia0"):
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    from .cuda_simulator import lock_shared_allocation

    lock_shared_allocation()  # the simulator's shared arrays, allocated under a lock (see the module)
# the native linear's kernel: the fixed choice (deterministic plans, nothing measured or written to the
# user's cache); tests/graph/test_kernel_choice.py measures, in a temporary cache
os.environ.setdefault("SEQJIT_KERNEL_CHOICE", "fixed")

import numpy as np
import pytest

from .cuda_simulator import short_switch_interval

#: tolerances for a compiled backend against the NumPy reference, per dtype
TOL = {
    np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
    np.dtype(np.float64): dict(rtol=1e-11, atol=1e-12),
}


@pytest.fixture
def tol():
    """``tol(dtype)`` -> keyword arguments for ``np.testing.assert_allclose``."""
    return lambda dtype: TOL[np.dtype(dtype)]


def _cuda_usable() -> str | None:
    """None when the cuda backend can run (GPU or simulator), else the reason it cannot."""
    try:
        from seqjit.kernels._cuda import require_cuda

        require_cuda()
    except Exception as exc:  # noqa: BLE001 - report any reason
        return str(exc)
    return None


@pytest.fixture(params=["numba", "cython", "cuda"])
def backend(request):
    """Every compiled backend; cuda is skipped only when neither a GPU nor the simulator is usable."""
    if request.param == "cuda":
        reason = _cuda_usable()
        if reason:
            pytest.skip(f"no GPU and no CUDA simulator: {reason}")
        with short_switch_interval():
            yield request.param
        return
    yield request.param


@pytest.fixture
def on_simulator():
    """True when cuda kernels run on the (slow) simulator: tests then use small shapes."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _tiny_marian(seed: int = 0, **overrides):
    """A seeded ``transformers.MarianMTModel`` with weights large enough that the best next tokens
    are far apart (with the default init_std the logits are nearly tied and argmax becomes a coin
    toss on rounding). Vocabulary 96: pad 95 (= decoder start), eos 0."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    cfg = dict(vocab_size=96, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
               pad_token_id=95, eos_token_id=0, decoder_start_token_id=95, forced_eos_token_id=None,
               activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True)
    cfg.update(overrides)
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**cfg)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p)) if name.endswith("weight") else p.normal_(0, 0.1)
            elif "embed_positions" not in name:
                p.normal_(0, 0.25)
    return model


@pytest.fixture(scope="session")
def make_tiny_marian():
    """``make_tiny_marian(seed=0, **config overrides)`` -> a seeded tiny MarianMTModel (see ``_tiny_marian``)."""
    return _tiny_marian


def _marian_generate(hf, sources, **kwargs):
    """transformers' ``hf.generate`` (no sampling) on ``sources`` (lists of token ids) padded with the
    tiny Marian's pad 95 under an attention mask, pad never generated, no forced end token; the
    generate output as transformers returns it."""
    import torch

    pad = 95
    width = max(len(s) for s in sources)
    ids = torch.full((len(sources), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sources), width), dtype=torch.long)
    for i, s in enumerate(sources):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    with torch.inference_mode():
        return hf.generate(input_ids=ids, attention_mask=mask, bad_words_ids=[[pad]], forced_eos_token_id=None,
                           do_sample=False, **kwargs)


@pytest.fixture(scope="session")
def marian_generate():
    """``marian_generate(hf, sources, **generate kwargs)``: see ``_marian_generate``."""
    return _marian_generate


def _with_threads(n, fn):
    """``fn()`` with seqjit at ``n`` threads (and the team of two's back-off forgotten)."""
    import seqjit
    from seqjit.graph import _native_vm

    before = seqjit.get_num_threads()
    seqjit.set_num_threads(n)
    _native_vm.team_forgive()
    try:
        return fn()
    finally:
        seqjit.set_num_threads(before)


@pytest.fixture
def with_threads():
    """``with_threads(n, fn)`` -> ``fn()`` run with seqjit at ``n`` threads."""
    return _with_threads


def _marian_sources(n, seed=0):
    rng = np.random.default_rng(seed)
    return [list(rng.integers(1, 94, k)) + [0] for k in rng.integers(2, 12, n)]


@pytest.fixture
def marian_sources():
    """``marian_sources(n, seed)`` -> n random sources of 2-11 tokens for the tiny Marian (ids 1-93),
    each ended by its end token 0."""
    return _marian_sources


@pytest.fixture
def team_logits():
    """``team_logits(model)`` -> ``(logits, (ids, tgt, lens))``: teacher-forced logits of three
    sources at 1 thread, after checking that at 2 threads some product went to the team of two
    (kernels/_runtime/native_team.h) and the logits are the same bit for bit."""
    from seqjit.decoding.api import pad_sources
    from seqjit.graph import _native_vm

    def check(model):
        ids, lens = pad_sources(_marian_sources(3), model.pad_id)
        tgt = np.array([[model.decoder_start_id, 5, 9, 13, 2]] * 3, np.int64)
        one = _with_threads(1, lambda: model.logits_stepwise(ids, tgt, lens))
        before = _native_vm.team_counts()[0]
        two = _with_threads(2, lambda: model.logits_stepwise(ids, tgt, lens))
        assert _native_vm.team_counts()[0] > before, "no product went to the team"
        np.testing.assert_array_equal(two, one)
        return one, (ids, tgt, lens)
    return check


@pytest.fixture(params=["avx512", "avx2", "base"])
def isa(request):
    """Each instruction-set variant of the native row and linear kernels, forced for the test; skipped
    where this CPU lacks it (absent hardware) or a lower $SEQJIT_ISA excludes it (that run covers the
    lower variants; .ci/isa runs each)."""
    from seqjit.graph import _native_vm

    got = _native_vm.linear_isa(request.param)
    if got != request.param:
        _native_vm.linear_isa(None)
        pytest.skip(f"this CPU does not run {request.param} (SEQJIT_ISA={os.environ.get('SEQJIT_ISA', 'unset')})")
    yield got
    _native_vm.linear_isa(None)


def pytest_collection_modifyitems(config, items):
    """The ``hf4`` tests (against ``transformers`` 4.x, .ci/hf4 in a venv of their own) run only when
    ``-m`` names ``hf4``: every other command (the README's ``-m "not slow and not toolkit and not hf4"`` as well, ``make
    test-all``) deselects them, as they cannot pass on the ``transformers`` 5 it runs."""
    if "hf4" in (config.getoption("markexpr", "") or ""):
        return
    kept, dropped = [], []
    for item in items:
        (dropped if item.get_closest_marker("hf4") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
