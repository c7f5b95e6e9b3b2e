"""A whole Transformer encoder pass on the GPU (simulator without one), device-resident.

The reference is the CPU model's encoder output, itself checked against PyTorch in
tests/models/test_transformer.py. Host<->device traffic is counted: weights go up once, then each
call sends only ids and lengths (the B lengths once per attention launch, after its host-side
bounds check) and brings back only the memory.
"""
import numpy as np
import pytest

from seqjit.models.transformer import TransformerConfig, TransformerModel


def _cuda_or_skip():
    from seqjit.kernels._cuda import CudaUnavailable, require_cuda

    try:
        return require_cuda()
    except CudaUnavailable as exc:
        pytest.skip(f"no GPU and no CUDA simulator: {exc}")


def tiny_model(norm_first: bool, positions: str, seed=0):
    cfg = TransformerConfig(src_vocab_size=23, tgt_vocab_size=23, d_model=8, encoder_layers=1, decoder_layers=1,
                            encoder_heads=2, decoder_heads=2, encoder_ffn_dim=12, decoder_ffn_dim=12,
                            activation="gelu", norm_first=norm_first, encoder_final_norm=norm_first,
                            positions=positions, max_positions=16, scale_embedding=True)
    rng = np.random.default_rng(seed)
    weights = {n: (rng.standard_normal(s.shape) * 0.5).astype(np.float32) for n, s in TransformerModel.weight_spec(cfg).items()}
    return TransformerModel(cfg, weights)


@pytest.mark.parametrize("norm_first,positions", [(False, "sinusoidal"), (True, "learned")])
def test_device_encoder_matches_cpu_encoder_and_stays_on_device(norm_first, positions, monkeypatch):
    cuda = _cuda_or_skip()
    from seqjit.gpu import DeviceTransformerEncoder

    model = tiny_model(norm_first, positions)
    ids = np.array([[3, 4, 5, 6, 7], [8, 9, 10, 0, 0]])
    lengths = np.array([5, 3])
    want = model.encode(ids, lengths)["memory"]
    encoder = DeviceTransformerEncoder(model)
    got = encoder.encode(ids, lengths)
    np.testing.assert_allclose(got[0], want[0], atol=2e-5)
    np.testing.assert_allclose(got[1, :3], want[1, :3], atol=2e-5)  # padded positions are not compared

    uploads, downloads = [], []
    to_device, copy_to_host = cuda.to_device, type(cuda.device_array(1)).copy_to_host
    monkeypatch.setattr(cuda, "to_device", lambda a, *args, **kw: uploads.append(np.shape(a)) or to_device(a, *args, **kw))
    monkeypatch.setattr(type(cuda.device_array(1)), "copy_to_host",
                        lambda self, *a, **kw: downloads.append(self.shape) or copy_to_host(self, *a, **kw))
    again = encoder.encode(ids, lengths)
    np.testing.assert_array_equal(again, got)
    # only ids and lengths travel up (checked on the host by each kernel, then sent: the B lengths
    # once per attention launch, a few bytes), never weights or activations
    sizes = [int(np.prod(shape)) for shape in uploads]
    assert ids.size in sizes and set(sizes) <= {ids.size, lengths.size}
    assert downloads == [got.shape]
