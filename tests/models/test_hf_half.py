"""Hugging Face checkpoints saved in 16 bits (``model.to(torch.bfloat16 | torch.float16)`` then
``save_pretrained``) load through ``from_hf`` as float32 models (each weight widened once, exactly),
against ``transformers``' own runs of the same files."""
import numpy as np
import pytest
import torch

import seqjit

from .conftest import tiny_hf
from .test_hf_families_generate import _check, _sources, hf_generate

#: unit roundoff of each format (half the distance from 1.0 to the next value): 8 and 11 significant bits
UNIT = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


@pytest.fixture(scope="module", params=[("marian", torch.bfloat16), ("marian", torch.float16),
                                        ("bart", torch.bfloat16), ("bart", torch.float16)],
                ids=lambda p: f"{p[0]}-{str(p[1])[6:]}")
def half_checkpoint(request, tmp_path_factory, make_tiny_marian):
    family, dtype = request.param
    path = tmp_path_factory.mktemp(f"{family}_half")
    hf = make_tiny_marian() if family == "marian" else tiny_hf("bart", tmp_path_factory.mktemp("bart32"))
    hf.to(dtype).save_pretrained(path, safe_serialization=True)
    return family, dtype, path, seqjit.from_hf(path)


def _hf(path, dtype):
    from transformers import AutoModelForSeq2SeqLM

    return AutoModelForSeq2SeqLM.from_pretrained(path, dtype=dtype).eval()


def _batch(model, seed=0):
    rng = np.random.default_rng(seed)
    V = model.target_vocab_size
    src, tgt = rng.integers(3, V - 1, (8, 12)), rng.integers(3, V - 1, (8, 10))
    tgt[:, 0] = model.decoder_start_id
    return src, tgt


def _logits(hf, src, tgt):
    with torch.inference_mode():
        out = hf(input_ids=torch.tensor(src), decoder_input_ids=torch.tensor(tgt)).logits
    return out.float().numpy()


def test_16_bit_checkpoint_logits_match_transformers(half_checkpoint):
    """Two references. (1) transformers loading the same 16-bit file as float32 (``dtype=float32``:
    its weights widened exactly, as seqjit widens them, the sinusoid computed in float32): the same
    float32 model, so only float32 summation order differs: tight, 1e-4. (2) transformers' native
    16-bit run (CPU, every matmul, norm and activation rounded to the format, and Marian's sinusoid
    rounded too): its logits differ from the float32 computation by rounding alone; over the 2+2
    layers' ~30 roundings of relative size u (the format's unit roundoff), we allow a mean error of
    4 u and a worst one of 32 u, in units of the logits' spread (measured: about 2 u and 12 u, for
    both formats, both families)."""
    family, dtype, path, model = half_checkpoint
    assert all(w.dtype == np.float32 for w in model.weights.values())
    src, tgt = _batch(model)
    ours = model.logits(src, tgt)
    np.testing.assert_allclose(ours, _logits(_hf(path, torch.float32), src, tgt), rtol=1e-4, atol=1e-4)
    native = _logits(_hf(path, dtype), src, tgt)
    err, u, spread = np.abs(ours - native), UNIT[dtype], float(ours.std())
    print(f"\n{family} {dtype}: |seqjit float32 - transformers {dtype}| mean {err.mean() / spread / u:.1f} u, "
          f"max {err.max() / spread / u:.1f} u (of the logit spread {spread:.2f})")
    assert err.mean() <= 4 * u * spread and err.max() <= 32 * u * spread


def test_16_bit_checkpoint_greedy_ids_match_transformers(half_checkpoint):
    """Greedy ids of 50 sources, native and Python replay, identical to transformers' float32 run of
    the same 16-bit file."""
    family, dtype, path, model = half_checkpoint
    sources = _sources(50, model.target_vocab_size, seed=3)
    _check(model, sources, hf_generate(_hf(path, torch.float32), model, sources, num_beams=1), beam_size=1)


def test_16_bit_weights_are_widened_exactly(half_checkpoint):
    """Each float32 weight is its 16-bit file value (the file's words read back by safetensors' torch API)."""
    from safetensors.torch import load_file

    family, dtype, path, model = half_checkpoint
    theirs = load_file(path / "model.safetensors")
    assert theirs["model.shared.weight"].dtype == dtype
    np.testing.assert_array_equal(model.weights["shared.weight"], theirs["model.shared.weight"].float().numpy())
