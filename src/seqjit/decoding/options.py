"""Decoding options: one checked record for greedy, beam search and sampling."""
from __future__ import annotations

import dataclasses
import difflib
import math
import numbers

import numpy as np

#: the longest output any model may be asked for: a larger ``max_length`` is refused before anything
#: is allocated (decoding keeps per-token buffers of that length; an RNN has no position limit)
MAX_LENGTH_LIMIT = 1 << 16

#: what each option does (rendered, with its default, into the docstrings of ``generate``)
OPTION_HELP = {
    "max_length": "at most this many generated tokens, the end token included; at most the model's positions "
                  f"(a Transformer's max_positions; the default is lowered to it) and {MAX_LENGTH_LIMIT}",
    "min_length": "the end token is forbidden while fewer tokens than this have been generated",
    "beam_size": "beam width; 1 decodes greedily (or samples)",
    "num_hypotheses": "the n-best kept per source (<= beam_size)",
    "length_penalty": "beam scores are sum(log p) / length ** length_penalty (as transformers); within the range "
                      "where float32 scores stay finite (about [-1.49, 12.5] at max_length 256)",
    "repetition_penalty": "scores of tokens already in the hypothesis are divided by it (negative scores multiplied), "
                          "as transformers' RepetitionPenaltyLogitsProcessor; finite, > 0",
    "no_repeat_ngram_size": "an n-gram never occurs twice in a hypothesis (start token included); 0: off",
    "sampling_topk": "1 is greedy (argmax); 0 samples from the whole distribution; k > 1 samples among the k best",
    "sampling_topp": "nucleus sampling: sample among the most likely tokens whose probabilities sum to topp; in (0, 1]",
    "sampling_temperature": "logits are divided by it before sampling; finite, > 0",
    "seed": "seeds sampling, an integer in [0, 2**64): each source's tokens are drawn from the Philox stream of "
            "(seed, its index in sources, step), the same in every batch and decode loop; None: a fresh seed per call",
    "forced_bos_id": "the first generated token (the target language of mBART-50, M2M100 or NLLB); None: the model's "
                     "own (its config's forced_bos_id, if any)",
    "forced_eos_id": "the token forced at the last allowed step (max_length); None: the model's own (its "
                     "generation config's forced_eos_token_id: BART, Pegasus and Marian force their end token)",
    "suppress_tokens": "token ids never generated (transformers' suppress_tokens); None: the model's own (its config's, "
                       "read from generation_config.json at conversion), () none",
    "begin_suppress_tokens": "token ids banned at the first generated step only (after a forced first token: at the "
                             "second, as transformers); None: the model's own",
    "bad_words_ids": "token sequences never generated: a one-token entry is banned everywhere, a longer one's last "
                     "token is banned right after its prefix (transformers' NoBadWordsLogitsProcessor; an entry that is "
                     "just the end token is ignored, as there); None: the model's own",
    "suppress_pad_token": "ban the padding token (seqjit's default, as transformers does for Marian); False lets it be "
                          "generated (as OpenNMT-py and JoeyNMT decode); None: the model's own (its config's, else True)",
    "return_scores": "give each hypothesis its score (sum of token log-probabilities, length-penalised in beam search)",
    "return_attention": "give each hypothesis its attention over the source, one row per generated token",
}


#: the suppression options, whose None means "the model's own" (resolved by decoding.api.resolve_rules)
SUPPRESSION_OPTIONS = ("suppress_tokens", "begin_suppress_tokens", "bad_words_ids", "suppress_pad_token")


@dataclasses.dataclass(frozen=True)
class DecodingOptions:
    """What :func:`seqjit.decoding.generate` does; every field is checked by :meth:`validate`
    (see :data:`OPTION_HELP` and :func:`describe_options` for each option)."""

    max_length: int = 256
    min_length: int = 0
    beam_size: int = 1
    num_hypotheses: int = 1
    length_penalty: float = 1.0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    sampling_topk: int = 1
    sampling_topp: float = 1.0
    sampling_temperature: float = 1.0
    seed: int | None = None
    forced_bos_id: int | None = None
    forced_eos_id: int | None = None
    # suppression rules (transformers' generation_config names; None: the model's own)
    suppress_tokens: tuple | None = None
    begin_suppress_tokens: tuple | None = None
    bad_words_ids: tuple | None = None
    suppress_pad_token: bool | None = None
    return_scores: bool = False
    return_attention: bool = False

    def __post_init__(self):
        # lists as tuples (the options are hashed); checked by validate
        for name in ("suppress_tokens", "begin_suppress_tokens"):
            value = getattr(self, name)
            if isinstance(value, (list, np.ndarray)):
                object.__setattr__(self, name, tuple(value.tolist() if isinstance(value, np.ndarray) else value))
        words = self.bad_words_ids
        if isinstance(words, (list, tuple)) and all(isinstance(w, (list, tuple)) for w in words):
            object.__setattr__(self, "bad_words_ids", tuple(tuple(w) for w in words))

    @property
    def step_rules(self) -> bool:
        """Whether a suppression rule depends on the step or the history (``begin_suppress_tokens``, a
        ``bad_words_ids`` entry of several tokens): the score processors of the Python loops apply
        those; the static bans (``suppress_tokens``, one-token bad words, the pad token) every loop."""
        return bool(self.begin_suppress_tokens) or any(len(w) > 1 for w in self.bad_words_ids or ())

    @property
    def sampling(self) -> bool:
        return self.sampling_topk != 1

    @property
    def forces_tokens(self) -> bool:
        """Whether a forced-token rule applies (the native greedy loop does not apply them)."""
        return self.forced_bos_id is not None or self.forced_eos_id is not None

    def validate(self) -> "DecodingOptions":
        """Check every field; a ValueError names the option and says what is wrong. Returns self."""
        def integer(name, low):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

        def finite(name):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            return value

        integer("max_length", 1)
        integer("min_length", 0)
        integer("beam_size", 1)
        integer("num_hypotheses", 1)
        integer("no_repeat_ngram_size", 0)
        integer("sampling_topk", 0)
        if self.max_length > MAX_LENGTH_LIMIT:
            raise ValueError(f"max_length {self.max_length} is more than seqjit decodes ({MAX_LENGTH_LIMIT} tokens)")
        if self.min_length > self.max_length:
            raise ValueError(f"min_length ({self.min_length}) must not exceed max_length ({self.max_length})")
        if self.num_hypotheses > self.beam_size:
            raise ValueError(f"num_hypotheses ({self.num_hypotheses}) must not exceed beam_size ({self.beam_size})")
        if self.beam_size > 1 and self.sampling:
            raise ValueError("sampling_topk != 1 (sampling) cannot be combined with beam_size > 1")
        for name in ("repetition_penalty", "sampling_temperature"):
            if not finite(name) > 0:
                raise ValueError(f"{name} must be a positive number, got {getattr(self, name)!r}")
        finite("length_penalty")
        if self.beam_size > 1:
            low, high = length_penalty_range(self.max_length)
            if not low <= self.length_penalty <= high:
                raise ValueError(f"length_penalty must lie in [{low:.3g}, {high:.3g}] with max_length {self.max_length} "
                                 "(beam scores sum(log p) / length ** length_penalty must stay finite in float32 and "
                                 f"above the beam search's -1e9 floor), got {self.length_penalty!r}")
        if not 0 < finite("sampling_topp") <= 1:
            raise ValueError(f"sampling_topp must be in (0, 1], got {self.sampling_topp!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)
                                      or not 0 <= self.seed < 1 << 64):
            raise ValueError(f"seed must be an integer in [0, 2**64) or None, got {self.seed!r}")
        for name in ("return_scores", "return_attention"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):  # 'no' and 'false' are truthy
                raise ValueError(f"{name} must be True or False, got {str(value)[:40]!r} ({type(value).__name__})")
        for name in ("forced_bos_id", "forced_eos_id"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
        self._validate_suppression()
        return self

    def _validate_suppression(self) -> None:
        def ids(name, value):
            if not isinstance(value, tuple) or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool)
                                                         and t >= 0 for t in value):
                raise ValueError(f"{name} must be a list of non-negative token ids or None, got {str(value)[:60]}")

        for name in ("suppress_tokens", "begin_suppress_tokens"):
            if getattr(self, name) is not None:
                ids(name, getattr(self, name))
        if self.bad_words_ids is not None:
            if not isinstance(self.bad_words_ids, tuple):
                raise ValueError(f"bad_words_ids must be a list of token-id lists or None, got {str(self.bad_words_ids)[:60]}")
            for k, word in enumerate(self.bad_words_ids):
                ids(f"bad_words_ids[{k}]", word)
                if not word:
                    raise ValueError(f"bad_words_ids[{k}] is empty")
        if self.suppress_pad_token is not None and not isinstance(self.suppress_pad_token, (bool, np.bool_)):
            raise ValueError(f"suppress_pad_token must be True, False or None, got {str(self.suppress_pad_token)[:40]!r}")


#: the beam search's score of an impossible hypothesis (-1e9): a length-penalised score must stay
#: above it, with a margin of 10
SCORE_FLOOR = 1e8
#: the largest -log p of one token that the bound assumes (float32 logits of a sane model)
MAX_TOKEN_NLL = 100.0
#: the largest divisor ``length ** length_penalty``: finite in float32, and a score divided by it
#: stays above float32's smallest normal number
MAX_DIVISOR = 1e30


def length_penalty_range(max_length: int) -> tuple:
    """``(low, high)``: the length penalties for which every beam score ``sum(log p) / length **
    length_penalty`` (length <= ``max_length``) is a finite float32 above the beam's floor: a
    larger one overflows the divisor (scores all 0, the ranking lost), a more negative one pushes
    scores past -1e9, where they pass for impossible hypotheses."""
    if max_length < 2:
        return -math.inf, math.inf
    log_length = math.log(max_length)
    worst_sum = max_length * MAX_TOKEN_NLL
    return -max(0.0, math.log(SCORE_FLOOR / worst_sum) / log_length), math.log(MAX_DIVISOR) / log_length


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
    "num_beam_groups": "no equivalent: diverse (group) beam search is not implemented",
    "diversity_penalty": "no equivalent: diverse (group) beam search is not implemented",
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
    "eos_token_id": "no equivalent: the model's own (model.eos_id, from its config)",
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


def describe_options(indent: str = "    ") -> str:
    """Every decoding option with its default and what it does, one per line (for docstrings)."""
    lines = [f"{indent}{f.name}={f.default!r}: {OPTION_HELP[f.name]}" for f in dataclasses.fields(DecodingOptions)]
    return "\n".join(lines)


def document_options(func):
    """Append the decoding options (:func:`describe_options`) to ``func``'s docstring."""
    func.__doc__ = (func.__doc__ or "").rstrip() + "\n\n    Decoding options (keyword arguments, with defaults):\n\n" \
        + describe_options("    - ") + "\n"
    return func
