"""Moving models: ``seqjit.load(path, device="cuda")``, ``from_torch(..., device="cuda")``,
``model.to("cuda")`` / ``to("cpu")``, and the errors: no usable GPU (named, in a child process without
the simulator), out of device memory, models the cuda kernels do not run, a bad device name."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import seqjit
from seqjit import errors

from .conftest import SOURCES, cuda_or_skip, tiny_models

HAS_GPU = os.path.exists("/dev/nvidia0")


def test_load_and_from_torch_on_the_device_and_back(tmp_path):
    cuda_or_skip()
    from seqjit.kernels._cuda import is_device_array

    model = tiny_models()["rnn_seq2seq"]
    model.save(tmp_path)
    want = model.generate(SOURCES[:2], max_length=4)
    loaded = seqjit.load(tmp_path, device="cuda")
    assert loaded.device == "cuda" and loaded.backend == "cuda"
    placement = loaded.device_runtime.placement
    assert placement._constants and all(is_device_array(d) for _, d in placement._constants.values())
    assert [r.ids for r in loaded.generate(SOURCES[:2], max_length=4)] == [r.ids for r in want]
    encoded = loaded.encode(np.array([[3, 4, 5]]))
    assert all(isinstance(v, np.ndarray) for v in encoded.values())  # encode returns host arrays
    assert loaded.to("cpu") is loaded and loaded.device == "cpu" and loaded.device_runtime is None
    assert [r.ids for r in loaded.generate(SOURCES[:2], max_length=4)] == [r.ids for r in want]
    torch_names = {n.replace(".rnn.", ".lstm."): w for n, w in model.weights.items()}  # nn.LSTM's names
    imported = seqjit.from_torch(torch_names, arch="rnn_seq2seq", device="cuda", bridge_activation="tanh")
    assert imported.device == "cuda"
    assert [r.ids for r in imported.generate(SOURCES[:1], max_length=4)] == [r.ids for r in want[:1]]


def test_bad_devices_and_models_are_refused():
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda', got 'gpu'"):
        tiny_models()["transformer"].to("gpu")
    with pytest.raises(ValueError, match="seqjit runs on one GPU"):
        seqjit.load("/nonexistent", device="cuda:1")
    models = tiny_models()
    model = models["luong"]
    double = type(model)(type(model.config)(**{**model.config.__dict__, "dtype": "float64"}),
                         {n: w.astype(np.float64) for n, w in model.weights.items()})
    with pytest.raises(TypeError, match="compute in float32; this model is float64"):
        double.to("cuda")
    int8 = seqjit.quantize(models["transformer"], "int8")
    with pytest.raises(ValueError, match="int8 models run on the CPU only; the GPU path runs float32 models and "
                                         "models with 16-bit weights"):
        int8.to("cuda")


def test_out_of_device_memory_while_uploading_weights_is_named(monkeypatch):
    cuda = cuda_or_skip()
    from numba.cuda.cudadrv.driver import CudaAPIError

    def full(*args, **kwargs):
        raise CudaAPIError(2, "cuMemAlloc failed")  # CUDA_ERROR_OUT_OF_MEMORY

    model = tiny_models()["transformer"]
    monkeypatch.setattr(cuda, "to_device", full)
    with pytest.raises(errors.DeviceOutOfMemory, match="out of GPU memory allocating an uploaded array"):
        model.to("cuda")
    assert model.device == "cpu" and model.backend is None  # left as it was


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: the cuda backend is usable without the simulator")
def test_no_gpu_is_named_when_moving_a_model():
    code = textwrap.dedent("""
        import numpy as np, seqjit
        from seqjit.models.rnn_seq2seq import RNNSeq2SeqConfig, RNNSeq2SeqModel
        cfg = RNNSeq2SeqConfig(src_vocab_size=5, tgt_vocab_size=5, hidden_size=2)
        model = RNNSeq2SeqModel(cfg, {n: np.zeros(s.shape, np.float32) for n, s in RNNSeq2SeqModel.weight_spec(cfg).items()})
        try:
            model.to("cuda")
        except seqjit.errors.CudaUnavailable as exc:
            print("CudaUnavailable:", exc, "| device:", model.device)
    """)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("CudaUnavailable: the cuda backend found no usable NVIDIA GPU: ") and line.endswith("| device: cpu")
    assert "NUMBA_ENABLE_CUDASIM=1" in line


def test_the_device_runtime_implements_the_decoder_step_contract_itself():
    """The GPU runtime has its own start / start_from / step (device arrays in, device state out), none
    borrowed from the model class, and the model calls them through the device registry's protocol."""
    import inspect

    from seqjit.gpu.runtime import DeviceRuntime
    from seqjit.models.base import Seq2SeqModel

    for name in ("start", "start_from", "step", "upload", "generate", "supports"):
        assert name in vars(DeviceRuntime), name
    for name in ("start", "start_from", "step"):
        assert vars(DeviceRuntime)[name] is not vars(Seq2SeqModel)[name]
        assert vars(DeviceRuntime)[name].__module__ == "seqjit.gpu.runtime"
    assert "Seq2SeqModel" not in inspect.getsource(inspect.getmodule(DeviceRuntime))
