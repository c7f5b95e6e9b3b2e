"""The OpenNMT-py options every model kind shares (RNN and Transformer): the values seqjit runs, each
checked by name (:func:`check_options`). An absent option takes OpenNMT-py's default.

- ``decoder_start_token`` ``<s>`` and ``default_specials`` ``<unk> <blank> <s> </s>``: the special ids
  seqjit records (0-3, the first four entries of OpenNMT-py's vocabularies) follow from them.
- no source features (``n_src_feats`` 0), no LoRA adapters (``lora_layers``, ``lora_embedding``), no
  quantised layers (``quant_layers``): their weights are not the plain linears seqjit reads.
"""
from __future__ import annotations

from seqjit.errors import ConfigError

DEFAULT_SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]
#: option -> the values seqjit runs, for every OpenNMT-py model
COMMON_MUST = {"decoder_start_token": ("<s>",), "default_specials": (DEFAULT_SPECIALS,), "n_src_feats": (0,),
               "lora_layers": ([],), "lora_embedding": (False,), "quant_layers": ([],), "model_task": ("seq2seq", None)}


def check_options(opt: dict, must: dict, *, kind: str = "") -> None:
    """A :class:`ConfigError` naming the first option of ``COMMON_MUST`` or ``must`` whose value seqjit
    does not run."""
    for key, allowed in {**COMMON_MUST, **must}.items():
        if key in opt and opt[key] not in allowed:
            raise ConfigError(f"from_opennmt: option {key}={opt[key]!r} is not supported{kind}; seqjit runs "
                              f"{list(allowed)}")


__all__ = ["COMMON_MUST", "DEFAULT_SPECIALS", "check_options"]
