"""The decoding keys of a Hugging Face model, read once for every family (:func:`decoding_rules`).

Where they come from, as ``transformers`` 5 decides: ``generation_config.json`` when the directory holds
one, and then that file alone (a key it lacks is unset, whatever ``config.json`` says); else the
generation keys of ``config.json``. Every key of ``generation_config.json`` is one of:

- a rule of the model (:data:`RULES`), applied: ``eos_token_id`` (one token, or a list: its first
  entry is the model's end token, and a list of several distinct ids is the model's ``end_token``, any
  of which ends a hypothesis, as ``transformers`` stops), ``decoder_start_token_id`` (else ``bos_token_id``, as ``transformers`` starts an
  mBART decoder), ``forced_bos_token_id``, ``forced_eos_token_id`` (the token forced at the last
  allowed step, seqjit's ``forced_eos_id``), ``suppress_tokens``, ``begin_suppress_tokens`` and
  ``bad_words_ids`` (the model's defaults of the decoding options of those names);
- a rule seqjit cannot apply (:data:`REFUSED`), a ModelFormatError naming the file and key when set:
  ``forced_decoder_ids``, ``sequence_bias``, ...;
- a search setting (:data:`SEARCH`: ``num_beams``, ``max_length``, ``no_repeat_ngram_size``, ...):
  ``transformers``' ``generate`` defaults for this model, which seqjit's ``generate`` takes per call
  (its own defaults otherwise); a value other than ``transformers``' global default is reported in a
  :class:`GenerationDefaultsWarning` naming the seqjit option to pass;
- without effect on the generated tokens (:data:`NO_EFFECT`: output flags, cache settings, ``pad_token_id``);

and any other key is refused by name.
"""
from __future__ import annotations

import warnings
from pathlib import Path

from seqjit.convert.hf_rules import Reader
from seqjit.errors import ModelFormatError

GENERATION_CONFIG = "generation_config.json"

#: applied to the model (the seqjit config fields in the module docstring)
RULES = ("eos_token_id", "decoder_start_token_id", "bos_token_id", "forced_bos_token_id", "forced_eos_token_id",
         "suppress_tokens", "begin_suppress_tokens", "bad_words_ids")
#: rules transformers applies to every search and seqjit cannot: refused when set (not None, empty or False)
REFUSED = ("forced_decoder_ids", "sequence_bias", "constraints", "force_words_ids", "stop_strings",
           "watermarking_config", "token_healing")
#: search settings -> transformers' global default (a different value is reported, not applied)
SEARCH = {"max_length": 20, "max_new_tokens": None, "min_length": 0, "min_new_tokens": None, "num_beams": 1,
          "num_return_sequences": 1, "length_penalty": 1.0, "repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
          "early_stopping": False, "do_sample": False, "temperature": 1.0, "top_k": 50, "top_p": 1.0,
          "typical_p": 1.0, "min_p": None, "top_h": None, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0,
          "renormalize_logits": False, "encoder_no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0,
          "exponential_decay_length_penalty": None, "num_beam_groups": 1, "diversity_penalty": 0.0,
          "penalty_alpha": None, "dola_layers": None, "guidance_scale": None, "max_time": None,
          "remove_invalid_values": False}
#: transformers' search settings whose seqjit option has the same name
_SAME_NAME = ("min_length", "length_penalty", "repetition_penalty", "no_repeat_ngram_size", "num_beam_groups",
              "diversity_penalty")
#: keys without effect on the generated tokens
NO_EFFECT = ("pad_token_id", "output_attentions", "output_hidden_states", "output_scores", "output_logits",
             "return_dict_in_generate", "use_cache", "cache_implementation", "cache_config", "max_cache_len",
             "compile_config", "disable_compile", "prefill_chunk_size", "continuous_batching_config", "low_memory",
             "use_mtp", "is_assistant", "num_assistant_tokens", "num_assistant_tokens_schedule",
             "assistant_confidence_threshold", "prompt_lookup_num_tokens", "max_matching_ngram_size",
             "assistant_early_exit", "assistant_lookbehind", "target_lookbehind", "assistant_ensemble_weight",
             "speculation_type", "transformers_version", "_from_model_config", "_commit_hash")
KNOWN = frozenset(RULES) | frozenset(REFUSED) | frozenset(SEARCH) | frozenset(NO_EFFECT)


class GenerationDefaultsWarning(UserWarning):
    """A model's generation config sets search settings (``num_beams``, ``max_length``, ...) that
    ``transformers``' ``generate`` uses by default and seqjit's ``generate`` takes per call."""


def generation_source(directory: Path | None, hf: Reader) -> Reader:
    """Where the decoding keys come from: ``generation_config.json`` when present, else ``config.json``."""
    if directory is None:
        return hf
    from seqjit.models.files import model_file, read_json

    path = model_file(directory, GENERATION_CONFIG)
    if not path.exists():
        return hf
    gen = Reader(read_json(path), str(path))
    unknown = sorted(str(k) for k in gen.data if k not in KNOWN)
    if unknown:
        raise ModelFormatError(f"{gen.where}: unknown key(s) {', '.join(repr(k[:40]) for k in unknown[:8])} "
                               "(not a generation setting seqjit reads or refuses)")
    return gen


def _one_token(gen: Reader, key: str, what: str):
    """A token id; a list of one id (or of equal ids) is that id; several distinct ids are refused."""
    value = gen.get(key)
    if isinstance(value, list):
        if len(set(map(repr, value))) > 1:
            raise ModelFormatError(f"{gen.where}: {key!r} lists several tokens {repr(value)[:60]}; seqjit {what}")
        value = value[0] if value else None
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ModelFormatError(f"{gen.where}: {key!r} must be a token id, got {repr(value)[:60]}")
    return value


def _token_list(gen: Reader, key: str):
    """A list of token ids (None when absent or empty)."""
    value = gen.get(key)
    if value is None or value == []:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        raise ModelFormatError(f"{gen.where}: {key!r} must be a list of token ids, got {repr(value)[:60]}")
    return value


def _bad_words(gen: Reader):
    words = gen.get("bad_words_ids")
    if words is not None and (not isinstance(words, list) or not all(
            isinstance(w, list) and w and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in w)
            for w in words)):
        raise ModelFormatError(f"{gen.where}: 'bad_words_ids' must be a list of token-id lists, got {repr(words)[:60]}")
    return words or None


def _report_search(gen: Reader) -> None:
    """Warn of the search settings set to other than transformers' defaults (seqjit does not apply them)."""
    from seqjit.decoding.options import HF_NAMES

    shown = []
    for key, default in SEARCH.items():
        value = gen.data.get(key)
        if value is None or value == default:
            continue
        if key in ("max_length", "min_length") and isinstance(value, int) and not isinstance(value, bool):
            hint = f"{key}={value - 1}, transformers counting the start token"
        elif key in _SAME_NAME:
            hint = f"{key}={value!r}"
        else:
            hint = HF_NAMES.get(key, "no equivalent")
            hint = f"{hint}={value!r}" if hint.isidentifier() else hint
        shown.append(f"{key}={repr(value)[:40]} (seqjit: {hint})")
    if shown:
        warnings.warn(f"{gen.where}: transformers' generate defaults for this model, which seqjit's generate takes "
                      f"per call (not from the file): {'; '.join(shown)}", GenerationDefaultsWarning, stacklevel=3)


def decoding_rules(directory: Path | None, hf: Reader, defaults: dict | None = None) -> dict:
    """``eos_id``, ``decoder_start_id``, ``end_token`` (None: ``eos_id`` alone), ``forced_bos_id``, ``forced_eos_id``, ``suppress_tokens``,
    ``begin_suppress_tokens`` and ``bad_words_ids`` for the seqjit config, from ``directory``'s
    generation config (``directory`` None, or no ``generation_config.json``: ``hf``, the ``config.json``,
    with the family's config-class ``defaults`` for keys it lacks); every other key refused or reported
    (the module docstring)."""
    gen = generation_source(directory, hf)
    if gen is hf and defaults:
        gen = Reader({**defaults, **{k: v for k, v in hf.data.items() if v is not None}}, hf.where)
    for key in REFUSED:
        if gen.get(key):
            raise ModelFormatError(f"{gen.where}: {key!r} is not supported by seqjit (remove it to decode without it)")
    ends = _token_list(gen, "eos_token_id")
    eos = ends[0] if ends else None
    start = _one_token(gen, "decoder_start_token_id", "starts from one token")
    if start is None:  # transformers starts from the BOS token then (mBART)
        start = _one_token(gen, "bos_token_id", "starts from one token")
    if eos is None:
        raise ModelFormatError(f"{gen.where}: missing 'eos_token_id' (seqjit needs the end token; transformers would "
                               "decode every hypothesis to max_length)")
    if start is None:
        raise ModelFormatError(f"{gen.where}: missing 'decoder_start_token_id' (or 'bos_token_id')")
    _report_search(gen)
    return dict(eos_id=eos, decoder_start_id=start, end_token=ends if len(set(ends)) > 1 else None,
                forced_bos_id=_one_token(gen, "forced_bos_token_id", "forces one first token"),
                forced_eos_id=_one_token(gen, "forced_eos_token_id", "forces one end token"),
                suppress_tokens=_token_list(gen, "suppress_tokens"),
                begin_suppress_tokens=_token_list(gen, "begin_suppress_tokens"), bad_words_ids=_bad_words(gen))
