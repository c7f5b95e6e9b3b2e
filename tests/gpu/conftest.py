"""Shared pieces of the GPU tests: tiny models of the three architectures, a transfer counter, and the
simulator's settings.

Every test here runs on a real GPU when one is present and on numba's CUDA simulator otherwise
(``tests/conftest.py`` switches it on); a test is skipped only when neither is usable, saying why.
The simulator runs each CUDA thread as a Python thread and its block manager polls them while holding
the GIL: with Python's default 5 ms switch interval every ``syncthreads`` costs milliseconds, so these
tests shorten the interval while they run (simulator only; ``tests/cuda_simulator.py`` says why that
is safe).
"""
import os

import numpy as np
import pytest

from seqjit.models.attention_seq2seq import AttentionSeq2SeqConfig, AttentionSeq2SeqModel
from seqjit.models.rnn_seq2seq import RNNSeq2SeqConfig, RNNSeq2SeqModel
from seqjit.models.transformer import TransformerConfig, TransformerModel

from ..cuda_simulator import short_switch_interval

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


@pytest.fixture(autouse=True)
def _simulator_switch_interval():
    with short_switch_interval():
        yield


def cuda_or_skip():
    """numba.cuda (a GPU or the simulator), or skip saying why neither is usable."""
    from seqjit.kernels._cuda import CudaUnavailable, require_cuda

    try:
        return require_cuda()
    except CudaUnavailable as exc:
        pytest.skip(f"no GPU and no CUDA simulator: {exc}")


@pytest.fixture
def cuda():
    return cuda_or_skip()


# -- tiny models -----------------------------------------------------------------------------------
VOCAB = 19  # target and source vocabulary: pad 0, start 1, end 2


def _random_model(cls, config, seed: int, scale: float = 0.6):
    rng = np.random.default_rng(seed)
    weights = {n: (rng.standard_normal(s.shape) * scale).astype(np.float32) for n, s in cls.weight_spec(config).items()}
    return cls(config, weights)


def tiny_models() -> dict:
    """One small model per architecture and attention kind (fresh instances, on the CPU)."""
    common = dict(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, pad_id=0, decoder_start_id=1, eos_id=2)
    marian_like = TransformerConfig(**common, d_model=8, encoder_layers=1, decoder_layers=1, encoder_heads=2,
                                    decoder_heads=2, encoder_ffn_dim=12, decoder_ffn_dim=12, activation="silu",
                                    positions="sinusoidal", position_layout="halves", max_positions=16,
                                    scale_embedding=True, share_embeddings=True, final_logits_bias=True)
    lstm = RNNSeq2SeqConfig(**common, hidden_size=8, embed_dim=6, cell="lstm", bidirectional=True, bridge="linear",
                            bridge_activation="tanh")
    bahdanau = AttentionSeq2SeqConfig(**common, hidden_size=8, embed_dim=6, bidirectional=True, bridge="linear",
                                      bridge_activation="tanh", attention="bahdanau")
    luong = AttentionSeq2SeqConfig(**common, hidden_size=8, embed_dim=6, num_layers=2, attention="general",
                                   decoder_input_activation="relu", output_log_softmax=True)
    return {
        "transformer": _random_model(TransformerModel, marian_like, 1),
        "rnn_seq2seq": _random_model(RNNSeq2SeqModel, lstm, 2),
        "bahdanau": _random_model(AttentionSeq2SeqModel, bahdanau, 3),
        "luong": _random_model(AttentionSeq2SeqModel, luong, 4),
    }


#: sources of different lengths (3 + 2 + 1 + 3 source tokens: the encoder's rows stay <= 16)
SOURCES = [[3, 4, 5], [6, 7], [8], [9, 10, 11]]


# -- counting host <-> device transfers -------------------------------------------------------------
class Transfers:
    """Every host -> device upload and device -> host download while active, as ``(shape, dtype)``.

    Counted where numba moves data: ``cuda.to_device`` and ``copy_to_device`` (uploads), ``copy_to_host``
    (downloads), and on the simulator also a host array passed straight to a kernel (numba would copy
    it there and back: recorded as ``implicit``)."""

    def __init__(self, monkeypatch, cuda):
        self.uploads, self.downloads, self.implicit = [], [], []
        array_type = type(cuda.device_array(1))
        to_device, to_host, copy_up = cuda.to_device, array_type.copy_to_host, array_type.copy_to_device
        record = self

        def counted_to_device(ary, *args, **kwargs):
            if SIMULATOR:
                record.uploads.append((np.shape(ary), np.asarray(ary).dtype))
            return to_device(ary, *args, **kwargs)

        def counted_to_host(self, *args, **kwargs):
            record.downloads.append((tuple(self.shape), np.dtype(self.dtype)))
            return to_host(self, *args, **kwargs)

        def counted_copy_up(self, ary, *args, **kwargs):
            if not SIMULATOR or isinstance(ary, np.ndarray):
                record.uploads.append((np.shape(ary), np.asarray(ary).dtype if isinstance(ary, np.ndarray) else None))
            return copy_up(self, ary, *args, **kwargs)

        monkeypatch.setattr(cuda, "to_device", counted_to_device)
        monkeypatch.setattr(array_type, "copy_to_host", counted_to_host)
        monkeypatch.setattr(array_type, "copy_to_device", counted_copy_up)
        if SIMULATOR:
            from numba.cuda.simulator import kernel

            launch = kernel.FakeCUDAKernel.__call__

            def checked_launch(kern, *args):
                if not kern._device and not kernel._kernel_context:  # a launch, not a device-function call
                    record.implicit.extend(a.shape for a in args if isinstance(a, np.ndarray) and a.ndim > 0)
                return launch(kern, *args)

            monkeypatch.setattr(kernel.FakeCUDAKernel, "__call__", checked_launch)

    def clear(self):
        self.uploads.clear()
        self.downloads.clear()
        self.implicit.clear()


@pytest.fixture
def transfers(monkeypatch):
    """``transfers()`` starts counting (see :class:`Transfers`)."""
    return lambda: Transfers(monkeypatch, cuda_or_skip())
