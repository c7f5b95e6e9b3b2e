"""16-bit models (``seqjit.quantize(model, "float16" | "bfloat16")``) on the GPU (the simulator in CI):
their 16-bit weights uploaded as uint16 (half the bytes), the same logits and greedy ids as on the CPU,
for every architecture."""
import numpy as np
import pytest

import seqjit

from .conftest import SOURCES, cuda_or_skip, tiny_models


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("arch", ["transformer", "rnn_seq2seq", "luong"])
def test_half_model_on_the_device_matches_the_cpu(arch, fmt):
    cuda_or_skip()
    from seqjit.kernels._cuda import is_device_array

    half = seqjit.quantize(tiny_models()[arch], fmt)

    def uploaded_as_uint16(model):
        sixteen = [d for _, d in model.device_runtime.placement._constants.values()
                   if is_device_array(d) and d.dtype == np.uint16]
        assert sixteen, "no 16-bit weight was uploaded as uint16"

    _same_on_the_device(half, uploaded_as_uint16)


def _same_on_the_device(model, check_placed=None):
    """``model``'s teacher-forced logits (within float32 rounding) and greedy ids equal on the CPU
    and after ``model.to("cuda")`` (``check_placed(model)`` in between)."""
    src = np.array([[3, 4, 5], [6, 7, 0]])
    lengths = np.array([3, 2])
    tgt = np.array([[1, 5, 6, 7], [1, 8, 9, 3]])
    want = model.logits(src, tgt, lengths)
    ids = [r.ids for r in model.generate(SOURCES, max_length=4)]
    model.to("cuda")
    if check_placed is not None:
        check_placed(model)
    np.testing.assert_allclose(model.logits(src, tgt, lengths), want, rtol=1e-4, atol=1e-5)
    assert [r.ids for r in model.generate(SOURCES, max_length=4)] == ids


def test_bf16_arithmetic_model_on_the_device():
    """bf16 products on the device (kernels/linear_half/cuda.py) against the CPU's vdpbf16ps chain:
    the same rounded activations and exact products, the sums in another order, so equal to float32
    rounding unless a sum lands on a bf16 rounding boundary (none on these inputs)."""
    cuda_or_skip()
    _same_on_the_device(seqjit.quantize(tiny_models()["transformer"], "bfloat16", arithmetic="bfloat16"))
