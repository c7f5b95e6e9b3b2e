"""The weights of a Hugging Face BART-style encoder-decoder (Marian, BART, mBART, M2M100, Pegasus) as
a seqjit :class:`~seqjit.models.transformer.TransformerModel`.

Every family stores its weights under the seqjit names with a ``model.`` prefix (``lm_head.weight`` and
``final_logits_bias`` at the top level). A file may also hold tied copies of the shared table
(``model.encoder.embed_tokens.weight``, ``model.decoder.embed_tokens.weight``, ``lm_head.weight`` when
the output is tied): each must equal the table it is tied to. A sinusoidal family's
``model.{encoder,decoder}.embed_positions.weight`` (Marian, Pegasus), which ``transformers`` reads
from the file, is used (:func:`stored_positions`). Any other tensor the file holds is an error, as is
a tensor the configuration needs but the file lacks (named by the model's weight check); the loader
is :func:`seqjit.convert.hf_loader.load_hf`.
"""
from __future__ import annotations

import numpy as np

from seqjit.errors import ModelFormatError


def hf_name(name: str) -> str:
    """The Hugging Face name of the seqjit weight ``name``."""
    return name if name in ("final_logits_bias", "lm_head.weight") else f"model.{name}"


def _untied_tables(raw: dict) -> bool:
    """Whether the file holds encoder and decoder token tables of their own (not both equal to
    ``model.shared.weight``)."""
    shared = raw.get("model.shared.weight")
    tables = [raw.get(f"model.{side}.embed_tokens.weight") for side in ("encoder", "decoder")]
    if any(t is None for t in tables):
        return False
    return shared is None or not all(t.shape == shared.shape and np.array_equal(t, shared) for t in tables)


def _position_name(side: str) -> str:
    return f"model.{side}.embed_positions.weight"


def stored_positions(raw: dict, cfg, source: str) -> dict:
    """The position tables a Marian/Pegasus file stores, as seqjit weights (``{}``: none, or equal to the
    sinusoid seqjit computes), for the checked TransformerConfig ``cfg``. ``transformers`` loads the
    stored table when there is one (its sinusoid only fills a missing one): a table within one unit in
    the last place of 1.0 in its own dtype (float32: 1.19e-7, float16: 9.8e-4) of the sinusoid
    (computed in float64, rounded to that dtype) is that sinusoid and seqjit computes it; any other
    makes the model's positions "learned" at offset 0 with the stored tables (a side without one gets
    the sinusoid, as ``transformers`` fills it). M2M100's sinusoid is a buffer ``transformers`` never
    reads from a file: such a tensor stays unused (an error)."""
    from seqjit.kernels.embedding.reference import sinusoidal_positions

    if cfg.positions != "sinusoidal" or cfg.position_layout == "fairseq":
        return {}
    stored = {side: raw[_position_name(side)] for side in ("encoder", "decoder") if _position_name(side) in raw}
    rows, dim = cfg.max_positions + cfg.position_offset, cfg.d_model
    for side, table in stored.items():  # checked before anything of that size is computed
        if table.shape != (rows, dim) or table.dtype.kind != "f":
            raise ModelFormatError(f"{source}: {_position_name(side)} has shape {table.shape} ({table.dtype}); "
                                   f"expected ({rows}, {dim}) floats (max_position_embeddings x d_model)")
    if not stored:
        return {}
    computed = sinusoidal_positions(rows, dim, layout=cfg.position_layout, dtype=np.float64)
    if all(float(np.abs(t.astype(np.float64) - computed.astype(t.dtype)).max()) <= float(np.finfo(t.dtype).eps)
           for t in stored.values()):
        return {}
    return {f"{side}.embed_positions.weight": stored.get(side, computed.astype(np.float32))
            for side in ("encoder", "decoder")}


def transformer_weights(raw: dict, config: dict, where: str, source: str, *, optional: tuple = (),
                        untie: bool = False) -> tuple:
    """``(cfg, weights, used)`` (:mod:`seqjit.convert.hf_loader`) of the seqjit config dict ``config``
    and the tensors ``raw`` of the file ``source``.

    ``optional``: config flags (``final_logits_bias``) turned off when the file lacks their tensor,
    where ``transformers`` fills it with zeros (Pegasus' ``_keys_to_ignore_on_load_missing``).
    ``untie``: with ``tie_output`` False, encoder and decoder token tables of their own in the file
    are used (``share_embeddings`` off): ``transformers`` 5 unties them all with
    ``tie_word_embeddings: false`` and then never reads ``model.shared.weight``.
    """
    from seqjit.models.transformer import TransformerConfig, TransformerModel

    config = dict(config)
    for flag in optional:
        if config.get(flag) and hf_name(flag) not in raw:
            config[flag] = False
    untied = _untied_tables(raw) if untie and not config.get("tie_output", True) else False
    if untied:
        config["share_embeddings"] = False
    cfg = TransformerConfig.from_dict(config, where=where)
    positions = stored_positions(raw, cfg, source)
    if positions:
        cfg = TransformerConfig.from_dict({**cfg.to_dict(), "positions": "learned", "position_offset": 0}, where=where)
    used: set = set()
    weights: dict = dict(positions)
    for name in TransformerModel.weight_spec(cfg):
        if hf_name(name) in raw:
            weights[name] = raw[hf_name(name)]
            used.add(hf_name(name))
    if "final_logits_bias" in weights:
        weights["final_logits_bias"] = weights["final_logits_bias"].reshape(-1)
    if cfg.share_embeddings and "shared.weight" not in weights:
        for alt in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
            if alt in raw:
                weights["shared.weight"] = raw[alt]
                break
    tied = "shared.weight" if cfg.share_embeddings else "decoder.embed_tokens.weight"
    copies = ["lm_head.weight"] if cfg.tie_output else []
    if cfg.share_embeddings:
        copies += ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
    for copy in copies:
        if copy in raw:
            if tied in weights and not np.array_equal(raw[copy], weights[tied]):
                raise ModelFormatError(f"{source}: {copy} differs from {tied!r} although the config ties them")
            used.add(copy)
    if untied:  # transformers' forward reads the encoder's and decoder's own tables, not this one
        used.add("model.shared.weight")
    if cfg.positions == "sinusoidal" and cfg.position_layout != "fairseq":  # equal to the sinusoid computed
        used.update(k for k in raw if k in (_position_name("encoder"), _position_name("decoder")))
    return cfg, weights, used
