"""The command printed when a ``pytorch_model.bin`` is refused works on a real Marian state dict, whose
tied embeddings share memory (issue 12, item 13): it is run here, then the model loads and matches."""
import shlex
import subprocess
import sys

import numpy as np
import pytest

import torch  # noqa: E402  (test extra)
import transformers  # noqa: E402  (test extra)

import seqjit  # noqa: E402
from seqjit.errors import ModelFormatError  # noqa: E402
from seqjit.models.io import pickle_conversion_command  # noqa: E402

TINY = dict(vocab_size=29, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=24,
            pad_token_id=28, decoder_start_token_id=28, eos_token_id=0)


def test_printed_command_converts_a_tied_marian_state_dict(tmp_path):
    directory = tmp_path / "it's a dir"  # a quote in the path: the command must still parse
    directory.mkdir()
    torch.manual_seed(0)
    hf = transformers.MarianMTModel(transformers.MarianConfig(**TINY)).eval()
    with torch.no_grad():
        hf.final_logits_bias.normal_(0, 0.5)
    state = hf.state_dict()
    assert state["model.shared.weight"].data_ptr() == state["lm_head.weight"].data_ptr()  # tied: shared memory
    hf.config.save_pretrained(directory)
    torch.save(state, directory / "pytorch_model.bin")

    with pytest.raises(ModelFormatError) as info:
        seqjit.from_hf(directory)
    command = pickle_conversion_command(directory / "pytorch_model.bin", directory / "model.safetensors")
    assert command in str(info.value)

    argv = shlex.split(command)
    assert argv[0] == "python"
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    model = seqjit.from_hf(directory)
    src = np.array([[5, 6, 7, 8, 0], [9, 10, 11, 0, 28]])
    tgt = np.array([[28, 3, 4], [28, 5, 6]])
    mask = (src != 28).astype(np.int64)
    with torch.no_grad():
        want = hf(input_ids=torch.from_numpy(src), attention_mask=torch.from_numpy(mask),
                  decoder_input_ids=torch.from_numpy(tgt)).logits.numpy()
    got = model.logits(src, tgt, mask.sum(1))
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
