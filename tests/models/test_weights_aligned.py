"""Every weight a kernel streams starts on a cache line (split 64-byte loads cost ~20% of a decode step)."""
import numpy as np

from seqjit.kernels._aligned import ALIGN, aligned


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_aligned_copies_only_what_is_off_a_line():
    raw = np.arange(1000, dtype=np.float32)
    start = next(i for i in range(16) if _address(raw[i:]) % ALIGN)  # a view off the line
    off = raw[start:start + 960].reshape(30, 32)
    fixed = aligned(off)
    assert _address(fixed) % ALIGN == 0 and fixed is not off
    np.testing.assert_array_equal(fixed, off)
    assert fixed.dtype == off.dtype and fixed.flags.c_contiguous
    assert aligned(fixed) is fixed


def test_model_weights_and_derived_constants_are_aligned(make_tiny_marian, tmp_path):
    import seqjit

    make_tiny_marian(seed=2).save_pretrained(tmp_path)
    model = seqjit.from_hf(tmp_path)
    assert all(_address(w) % ALIGN == 0 for w in model.weights.values())
    model.generate([[5, 6, 7, 8, 9]] * 6, max_length=4)  # lowers the plans: merged and packed copies
    for name in ("encoder", "decoder_step"):
        graph = model.executor(name).graph
        derived = {k: v for k, v in graph.constants.items() if isinstance(v, np.ndarray) and ".merged" in k}
        assert derived, f"no merged projection in the {name} graph"
        assert all(_address(v) % ALIGN == 0 for v in derived.values())
        assert all(_address(v) % ALIGN == 0 for v in graph.__dict__.get("_native_packed", {}).values())
