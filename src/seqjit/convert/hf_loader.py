"""One loader protocol for every Hugging Face family (registered by ``model_type`` in
:data:`seqjit.convert.FROM_HF`).

A family declares one function, ``build(directory, hf_config, raw, dtype) -> (cfg, weights, used)``:
the checked TransformerConfig from ``config.json`` (its sizes and structure; its decoding keys from
:func:`seqjit.convert.hf_generation.decoding_rules`, the one reader of ``config.json`` +
``generation_config.json`` for every family) and from what the file's tensors decide (untied tables,
stored position tables), the tensors under seqjit names, and the names of the file's tensors it used
(read, or checked equal to one read). :func:`load_hf` reads the tensors, refuses by name every
tensor the family did not use, and builds the model.
"""
from __future__ import annotations

from pathlib import Path

from seqjit.convert.common import cast_floats, read_hf_weights, unused_error


def load_hf(build, directory: Path, hf_config: dict, *, backend=None, dtype: str = "float32",
            allow_nonfinite: bool = False):
    """The TransformerModel of ``directory`` by the family function ``build`` (the module docstring)."""
    from seqjit.models.transformer import TransformerModel

    source = str(directory / "model.safetensors")
    raw = read_hf_weights(directory, allow_nonfinite=allow_nonfinite)
    cfg, weights, used = build(directory, hf_config, raw, dtype)
    unused = set(raw) - set(used)
    if unused:
        raise unused_error(source, unused)
    return TransformerModel(cfg, cast_floats(weights, cfg.dtype), backend=backend, source=source)
