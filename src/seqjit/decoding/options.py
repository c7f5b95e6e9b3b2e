"""The decoding options as ``generate`` takes them: :class:`DecodingOptions` (declared in
:mod:`seqjit.models.decode_options`, where the model's methods read them) and the names of
``transformers``' ``generate`` arguments, each with the seqjit option to write instead."""
from __future__ import annotations

import difflib

from seqjit.models.decode_options import (MAX_LENGTH_LIMIT, SUPPRESSION_OPTIONS, DecodingOptions,  # noqa: F401
                                          describe_options, length_penalty_range, option_help, with_options)


#: ``transformers``' ``generate`` arguments by name: the seqjit option to write instead, or (prefixed
#: ``no equivalent``) why seqjit has none
HF_NAMES = {
    "num_beams": "beam_size", "num_return_sequences": "num_hypotheses", "top_k": "sampling_topk",
    "top_p": "sampling_topp", "temperature": "sampling_temperature",
    "max_new_tokens": "max_length (it counts the end token)", "min_new_tokens": "min_length",
    "do_sample": "sampling_topk=0 (sample from the whole distribution) or k > 1",
    "output_scores": "return_scores", "output_attentions": "return_attention",
    "num_return_hypotheses": "num_hypotheses",
    "forced_bos_token_id": "forced_bos_id", "forced_eos_token_id": "forced_eos_id",
    "return_dict_in_generate": "return_scores / return_attention (results are always GenerationResult objects)",
    "attention_mask": "lengths (with a padded 2-D array of sources)",
    "input_ids": "sources (the second positional argument)",
    "streamer": "callback=, or generate_stream",
    "stopping_criteria": "callback= (returning True stops that source)",
    "max_time": "no equivalent: decoding stops at max_length or the end token",
    "early_stopping": "no equivalent: beam search stops once no running hypothesis can beat the finished ones",
    "penalty_alpha": "no equivalent: contrastive search is not implemented",
    "typical_p": "no equivalent: typical sampling is not implemented (sampling_topk, sampling_topp)",
    "epsilon_cutoff": "no equivalent: truncation sampling is not implemented (sampling_topk, sampling_topp)",
    "eta_cutoff": "no equivalent: truncation sampling is not implemented (sampling_topk, sampling_topp)",
    "encoder_no_repeat_ngram_size": "no equivalent (no_repeat_ngram_size bans n-grams of the output only)",
    "exponential_decay_length_penalty": "no equivalent (length_penalty)",
    "renormalize_logits": "no equivalent: scores are always log-softmax of the processed logits",
    "output_hidden_states": "no equivalent: hidden states are not returned",
    "use_cache": "no equivalent: the decoder state (a KV cache) is always kept",
    "guidance_scale": "no equivalent: classifier-free guidance is not implemented",
    "pad_token_id": "no equivalent: the model's own (model.pad_id, from its config)",
    "eos_token_id": "end_token (an id or a list; None: the model's own, from its generation config)",
    "decoder_input_ids": "target_prefix (per source, the ids after the decoder start token)",
    "bos_token_id": "no equivalent: the model's own (model.decoder_start_id, from its config)",
    "decoder_start_token_id": "no equivalent: the model's own (model.decoder_start_id, from its config)",
    "generation_config": "no equivalent: give the options as keyword arguments",
    "logits_processor": "no equivalent: the processors are the options (repetition_penalty, no_repeat_ngram_size, ...)",
    "prefix_allowed_tokens_fn": "no equivalent: constrained decoding is not implemented",
    "allow_pad": "suppress_pad_token=False", "allow_pad_token": "suppress_pad_token=False",
}


def unknown_options_message(unknown, known) -> str:
    """Names ``unknown`` with, for each, the seqjit option it probably means (a ``transformers`` name
    or a close spelling) or that seqjit has none, then the known ones."""
    hints = []
    for name in unknown:
        shown = str(name)[:40]
        guess = HF_NAMES.get(name) or next(iter(difflib.get_close_matches(str(name), known, n=1)), None)
        if guess is None:
            hints.append(repr(shown))
        elif guess.startswith("no equivalent"):
            hints.append(f"{shown!r} (a transformers argument; seqjit has {guess})")
        else:
            hints.append(f"{shown!r} (did you mean {guess}?)")
    return f"unknown decoding option(s) {', '.join(hints)}; known: {sorted(known)}"
